package objstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ProbeDir is where Probe creates its objects, relative to the store.
const ProbeDir = "_walctl/probe"

// Probe checks that the store honours conditional creates, which Lance
// commits rest on: it creates one fresh object twice with PutIfAbsent. The
// second create must be refused (ErrExists); if it succeeds the store would
// let two writers both commit one version, and Probe returns ErrUnsafeStore
// naming the store. The probe object is removed either way. A store that
// cannot be reached fails with its own error (bucket, endpoint, access).
//
// A first create refused as existing names a key nobody has used (a new
// UUID): the store refused it for its own reasons — versitygw does when
// writers probing together create and remove objects in one new directory
// (TestConcurrentProbesOfANewPrefix) — so the probe starts again with
// another key, a few times, before it gives up.
func Probe(ctx context.Context, s Store) error {
	var err error
	for attempt := 1; attempt <= probeAttempts; attempt++ {
		var refused bool
		if refused, err = probeOnce(ctx, s); !refused {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
	return fmt.Errorf("probe %s: %d creates of never-used keys were refused as existing: %w", s, probeAttempts, err)
}

const probeAttempts = 5

// probeOnce is one probe with a new key; refused reports a first create
// refused as existing (err is then that refusal).
func probeOnce(ctx context.Context, s Store) (refused bool, err error) {
	key := ProbeDir + "/" + uuid.NewString()
	data := []byte("walctl conditional-create probe\n")
	if err := s.PutIfAbsent(ctx, key, data, nil); err != nil {
		return errors.Is(err, ErrExists), fmt.Errorf("probe %s: %w", s, err)
	}
	defer s.Delete(context.WithoutCancel(ctx), key)
	err = s.PutIfAbsent(ctx, key, data, nil)
	switch {
	case err == nil:
		return false, fmt.Errorf("%s: a second create of %s with If-None-Match: * succeeded: %w", s, s.Join(key), ErrUnsafeStore)
	case errors.Is(err, ErrExists):
		return false, nil
	}
	return false, fmt.Errorf("probe %s: %w", s, err)
}
