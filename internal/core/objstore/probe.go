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

// Probe checks that the store honours every conditional request walctl
// relies on, with one fresh object:
//
//   - create-if-absent, which Lance commits and pinned plans rest on: a
//     second PutIfAbsent of the object must be refused (ErrExists), else
//     two writers could both commit one version;
//   - compare-and-delete, by which plans and attempts are retired (on a
//     store that implements Tagged): once the object is replaced, a
//     DeleteIfMatch with the ETag read before must be refused (ErrChanged)
//     and leave the object, else a stale retirement could remove a record
//     pinned anew; one with the current ETag must remove it.
//
// A store that ignores a condition is ErrUnsafeStore, naming the store and
// the condition. The probe object is removed either way. A store that
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
		return false, fmt.Errorf("%s ignores If-None-Match on PUT (create-if-absent): a second create of %s with If-None-Match: * succeeded: %w", s, s.Join(key), ErrUnsafeStore)
	case !errors.Is(err, ErrExists):
		return false, fmt.Errorf("probe %s: %w", s, err)
	}
	if tg, ok := s.(Tagged); ok {
		return false, probeDeleteIfMatch(ctx, s, tg, key)
	}
	return false, nil
}

// probeDeleteIfMatch checks compare-and-delete on key, which holds the
// probe's object: it replaces the object, so the ETag read before is
// stale, and deletes with each ETag.
func probeDeleteIfMatch(ctx context.Context, s Store, tg Tagged, key string) error {
	_, stale, err := tg.GetTagged(ctx, key)
	switch {
	case err != nil:
		return fmt.Errorf("probe %s: %w", s, err)
	case stale == "":
		return fmt.Errorf("%s cannot compare-and-delete (If-Match on DELETE): a read of %s returned no ETag: %w", s, s.Join(key), ErrUnsafeStore)
	}
	replaced := []byte("walctl compare-and-delete probe: the object that replaced the one read\n")
	if err := s.Put(ctx, key, replaced); err != nil {
		return fmt.Errorf("probe %s: %w", s, err)
	}
	err = tg.DeleteIfMatch(ctx, key, stale)
	switch {
	case err == nil:
		return fmt.Errorf("%s ignores If-Match on DELETE (compare-and-delete): a delete of %s with If-Match of the ETag of an object since replaced succeeded: %w", s, s.Join(key), ErrUnsafeStore)
	case !errors.Is(err, ErrChanged):
		return fmt.Errorf("probe %s: %w", s, err)
	}
	_, current, err := tg.GetTagged(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%s ignores If-Match on DELETE (compare-and-delete): a delete of %s with If-Match of a stale ETag was refused but removed the object: %w", s, s.Join(key), ErrUnsafeStore)
	case err != nil:
		return fmt.Errorf("probe %s: %w", s, err)
	}
	if err := tg.DeleteIfMatch(ctx, key, current); err != nil {
		return fmt.Errorf("probe %s: a delete of %s with If-Match of its current ETag: %w", s, s.Join(key), err)
	}
	switch _, err := s.Stat(ctx, key); {
	case err == nil:
		return fmt.Errorf("%s ignores If-Match on DELETE (compare-and-delete): a delete of %s with If-Match of its current ETag succeeded but left the object: %w", s, s.Join(key), ErrUnsafeStore)
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("probe %s: %w", s, err)
	}
	return nil
}
