package objstore

import (
	"context"
	"errors"
	"fmt"

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
func Probe(ctx context.Context, s Store) error {
	key := ProbeDir + "/" + uuid.NewString()
	data := []byte("walctl conditional-create probe\n")
	if err := s.PutIfAbsent(ctx, key, data, nil); err != nil {
		return fmt.Errorf("probe %s: %w", s, err)
	}
	defer s.Delete(context.WithoutCancel(ctx), key)
	err := s.PutIfAbsent(ctx, key, data, nil)
	switch {
	case err == nil:
		return fmt.Errorf("%s: a second create of %s with If-None-Match: * succeeded: %w", s, s.Join(key), ErrUnsafeStore)
	case errors.Is(err, ErrExists):
		return nil
	}
	return fmt.Errorf("probe %s: %w", s, err)
}
