package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
)

// retireTagged is retireRecord on an object store, where a record's
// identity is its ETag:
//
//  1. guard: the caller still holds the table's claim.
//  2. create `to` with the bytes read, if absent; an existing `to` must
//     hold the same bytes (a retirement of this record that died after
//     its copy), else errs.ErrConflict and nothing changed.
//  3. delete the pinned key only if it still holds the record read
//     (DeleteIfMatch on its ETag); a key that holds another record
//     (retired and pinned anew meanwhile) is left alone, errs.ErrConflict.
//
// A retirement interrupted anywhere leaves the record pinned, retired, or
// both (a later retirement completes it).
func (s *Store) retireTagged(ctx context.Context, guard Guard, src recordSource, to string) error {
	if guard == nil {
		return fmt.Errorf("retire %s without the claim's guard: %w", src.path, errs.ErrInvalid)
	}
	tg, ok := s.st.(objstore.Tagged)
	if !ok || src.etag == "" {
		return fmt.Errorf("retire %s: the store cannot compare records: %w", src.path, errs.ErrInvalid)
	}
	if err := guard(ctx); err != nil {
		return fmt.Errorf("retire %s: %w", src.path, err)
	}
	err := s.st.PutIfAbsent(ctx, to, src.data, nil)
	if errors.Is(err, objstore.ErrExists) {
		got, gerr := s.st.Get(ctx, to)
		if gerr != nil {
			return fmt.Errorf("retire %s: %w", src.path, gerr)
		}
		if !bytes.Equal(got, src.data) {
			return fmt.Errorf("retire %s: %s already holds another record: %w", src.path, s.st.Join(to), errs.ErrConflict)
		}
	} else if err != nil {
		return fmt.Errorf("retire %s: %w", src.path, err)
	}
	if err := tg.DeleteIfMatch(ctx, src.key, src.etag); err != nil {
		if errors.Is(err, objstore.ErrChanged) {
			return fmt.Errorf("retire %s: the record was replaced since it was read: %w", src.path, errs.ErrConflict)
		}
		return fmt.Errorf("retire %s: %w", src.path, err)
	}
	return nil
}
