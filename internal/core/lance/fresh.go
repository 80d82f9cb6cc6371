package lance

import (
	"context"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
)

// ErrVersionReused means a commit created a version whose number had been
// used before and freed (its manifest removed by a cleaner) while the
// commit's parent, read long before, was removed too: a stale writer
// filling a hole below the latest version. The manifest was removed again,
// so, like every ErrCommitConflict, nothing of the attempt is in the table.
var ErrVersionReused = fmt.Errorf("version number freed by a clean and reused: %w", ErrCommitConflict)

// confirmFresh is the check after a commit created version v on parent
// (DESIGN.md §3 rule 23: a version number is created once, ever). The
// create-if-absent of v proves only that no manifest v exists *now*; a
// cleaner that removed v (and the versions below it) after another writer
// created it leaves a hole that a writer whose check ran on the old parent
// can fill. Cleaners remove versions oldest first and never the latest two
// (publish.Session.Clean), so a hole at v exists only once the parent is
// gone: a parent still there proves v's number fresh. A parent that is
// gone makes this commit a reuse: its manifest is removed again and the
// attempt fails with ErrVersionReused. (A parent removed in the instant
// after a legitimate link, by a clean that fenced on top of v, makes the
// same decision: the fence that followed already carries v's content, so
// nothing is lost; the committer is fenced out either way.) When the parent
// cannot be looked up, or the manifest cannot be removed, the error wraps
// neither ErrCommitConflict nor ErrCommitUnknown: the caller must not
// retry, nor take the version as its own, and re-reads the table.
func (d *Dataset) confirmFresh(ctx context.Context, parent, v uint64, v2 bool) error {
	ctx = context.WithoutCancel(ctx) // the link happened: finish the check
	for _, pv2 := range []bool{true, false} {
		_, err := d.store.Stat(ctx, versionsDir+"/"+manifestName(parent, pv2))
		if err == nil {
			return nil
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("version %d of %s created, but whether its parent %d still exists is unknown: %w", v, d.root, parent, errors.Join(errs.ErrUnavailable, err))
		}
	}
	if err := d.store.Delete(ctx, versionsDir+"/"+manifestName(v, v2)); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("version %d of %s reuses a number freed by a clean (parent %d was removed) and could not be removed again; remove it before anything reads it: %w", v, d.root, parent, errors.Join(errs.ErrCorrupt, err))
	}
	return fmt.Errorf("version %d of %s: parent %d was removed, so %d's number had been freed; the manifest was removed again: %w", v, d.root, parent, v, ErrVersionReused)
}
