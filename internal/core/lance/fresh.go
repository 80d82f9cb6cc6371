package lance

import (
	"bytes"
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
// gone: the parent still there, byte for byte the manifest the commit read,
// proves v's number fresh. (Its mere existence does not: another stale
// writer may have filled the parent's freed number meanwhile.) A parent
// gone or replaced makes this commit a reuse: its manifest is removed again
// and the attempt fails with ErrVersionReused. (A parent removed in the
// instant after a legitimate link, by a clean that fenced on top of v,
// makes the same decision: the fence that followed already carries v's
// content, so nothing is lost; the committer is fenced out either way.)
// When the parent cannot be read, or the manifest cannot be removed, the
// error wraps neither ErrCommitConflict nor ErrCommitUnknown: the caller
// must not retry, nor take the version as its own, and re-reads the table.
func (d *Dataset) confirmFresh(ctx context.Context, parent *Manifest, v uint64, txnID string) error {
	ctx = context.WithoutCancel(ctx) // the link happened: finish the check
	same, err := d.sameParent(ctx, parent)
	if err != nil {
		return fmt.Errorf("version %d of %s created, but whether its parent %d is still the one it was built on is unknown: %w", v, d.root, parent.Version, errors.Join(errs.ErrUnavailable, err))
	}
	if same {
		return nil
	}
	if err := d.store.Delete(ctx, versionsDir+"/"+manifestName(v, parent.V2Naming)); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("version %d of %s reuses a number freed by a clean (parent %d was removed) and could not be removed again; remove it before anything reads it: %w", v, d.root, parent.Version, errors.Join(errs.ErrCorrupt, err))
	}
	return fmt.Errorf("version %d of %s: parent %d was removed or replaced, so %d's number had been freed; the manifest (transaction %s) was removed again: %w", v, d.root, parent.Version, v, txnID, ErrVersionReused)
}

// sameParent reports whether parent's manifest is still in the store,
// byte for byte as it was read.
func (d *Dataset) sameParent(ctx context.Context, parent *Manifest) (bool, error) {
	raw, err := d.store.Get(ctx, versionsDir+"/"+manifestName(parent.Version, parent.V2Naming))
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(raw, parent.raw), nil
}

// resolveReused is confirmFresh for a commit whose outcome is unknown
// (cause): with the parent unchanged it returns cause, to be resolved by
// re-reading as ever; with the parent gone or replaced, version v — if it
// holds this commit's transaction — reuses a freed number and is removed,
// and the attempt fails with ErrVersionReused (a conflict: nothing of it is
// in the table).
func (d *Dataset) resolveReused(ctx context.Context, parent *Manifest, v uint64, txnID string, cause error) error {
	ctx = context.WithoutCancel(ctx)
	if same, err := d.sameParent(ctx, parent); err != nil || same {
		return cause
	}
	m, err := d.Manifest(v)
	if errors.Is(err, ErrVersionNotFound) {
		return fmt.Errorf("version %d of %s: parent %d was removed or replaced, and the commit is not there: %w", v, d.root, parent.Version, ErrVersionReused)
	}
	if err != nil {
		return cause
	}
	if txn, ok, err := m.Transaction(d.store); err != nil || !ok || txn.UUID != txnID {
		return cause // another writer's version: not this commit's to judge
	}
	return d.confirmFresh(ctx, parent, v, txnID)
}
