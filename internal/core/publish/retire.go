package publish

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// retire moves the record read from src to the key to, but only the exact
// record read (rule 8): by file identity on a local directory
// (retireRecord), by ETag on an object store (retireTagged).
func (s *Store) retire(ctx context.Context, guard Guard, src recordSource, to string) error {
	if s.st.Local() != "" {
		return retireRecord(ctx, guard, src, s.st.Join(to))
	}
	return s.retireTagged(ctx, guard, src, to)
}

// retireRecord moves the record read from src to the name to, but only the
// exact record read (rule 8): records are never rewritten in place, so a
// record is its file's identity (device and inode), and a name that now
// holds another file holds another record.
//
//  1. guard: the caller still holds the table's claim.
//  2. link(2) src's name to `to`: this takes whatever file the name holds
//     now; if that is not the record read, the extra link is removed and
//     the retirement refused (errs.ErrConflict), nothing else changed.
//  3. rename the pinned name to a private one and check it again: the
//     record read is then unlinked; anything else (retired and pinned anew
//     between 2 and 3) is put back under its name.
//
// Every step is synced: a retirement interrupted anywhere leaves the
// record pinned, retired, or both (a later retirement completes it).
func retireRecord(ctx context.Context, guard Guard, src recordSource, to string) error {
	if guard == nil {
		return fmt.Errorf("retire %s without the claim's guard: %w", src.path, errs.ErrInvalid)
	}
	if err := guard(ctx); err != nil {
		return fmt.Errorf("retire %s: %w", src.path, err)
	}
	if err := durable.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	err := durable.Link(src.path, to)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // retired by someone else already
	case errors.Is(err, fs.ErrExist):
		// A retirement of this record that died after its link, or another
		// record of the same id: only the former may proceed.
		if !sameRecord(to, src) {
			return fmt.Errorf("retire %s: %s already holds another record: %w", src.path, to, errs.ErrConflict)
		}
	case err != nil:
		return fmt.Errorf("retire %s: %w", src.path, err)
	default:
		if !sameRecord(to, src) {
			_ = durable.Remove(to) // only the link just made; the record stays pinned
			return fmt.Errorf("retire %s: the record was replaced since it was read: %w", src.path, errs.ErrConflict)
		}
	}
	if err := durable.SyncDir(filepath.Dir(to)); err != nil {
		return err
	}
	return unlinkIfSame(src)
}

// unlinkIfSame removes src's name if it still holds the record read.
func unlinkIfSame(src recordSource) error {
	aside := filepath.Join(filepath.Dir(src.path), ".retiring-"+newID()[:12])
	if err := durable.Rename(src.path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by a concurrent retirement of the same record
		}
		return fmt.Errorf("retire %s: %w", src.path, err)
	}
	if sameRecord(aside, src) {
		return durable.Remove(aside)
	}
	// Another record took the name between the link and the rename: give it
	// back its name.
	if err := durable.Link(aside, src.path); err != nil {
		return fmt.Errorf("retire %s: the record was replaced since it was read, and putting the new one back failed (it is at %s): %v: %w",
			src.path, aside, err, errs.ErrConflict)
	}
	if err := durable.Remove(aside); err != nil {
		return err
	}
	return fmt.Errorf("retire %s: the record was replaced since it was read: %w", src.path, errs.ErrConflict)
}

// sameRecord reports whether path is the file src was read from.
func sameRecord(path string, src recordSource) bool {
	fi, err := os.Stat(path)
	return err == nil && src.fi != nil && os.SameFile(fi, src.fi) && fi.Size() == src.fi.Size()
}
