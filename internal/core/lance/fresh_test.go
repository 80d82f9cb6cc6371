package lance

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
)

// Issue 31 finding 2 at the dataset level: a writer checked parent 2 and
// stalled before its link; meanwhile versions 3 and 4 were committed and a
// clean removed 1..3 (oldest first, never the latest). The writer's link
// of 3 finds the slot free, but 3's number was used before: the commit is
// undone and reported as a lost race, and the table lists only 4.
func TestCommitIntoFreedVersionNumberIsUndone(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	ctx := testCtx(t)
	r := smallBatch(0, 10)
	defer r.Release()
	first := writeFile(t, d, r)
	appendFiles(t, d, map[string]string{"who": "first"}, first) // version 2
	stale := writeFile(t, d, r)
	d.Hooks.BeforeLink = func(_ context.Context, v uint64) error {
		d.Hooks.BeforeLink = nil
		// While the stale writer is paused: a successor commits 3 and 4,
		// then a clean removes everything below the latest.
		if _, err := d.Commit(ctx, CommitRequest{ParentVersion: 2, Kind: ConfigOnly, ConfigSet: map[string]string{"who": "fence"}}); err != nil {
			return err
		}
		appendFiles(t, d, map[string]string{"who": "successor"}, writeFile(t, d, r))
		for _, old := range []uint64{1, 2, 3} {
			if err := d.RemoveVersion(ctx, old); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := d.Commit(ctx, CommitRequest{ParentVersion: 2, Kind: Append, Files: []Descriptor{stale}, ConfigSet: map[string]string{"who": "stale"}})
	if !errors.Is(err, ErrVersionReused) || !errors.Is(err, ErrCommitConflict) {
		vs, _ := d.Versions()
		t.Fatalf("commit into the freed version 3: %v; versions now %v", err, versionNumbers(vs))
	}
	vs, err := d.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if got := versionNumbers(vs); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("versions %v, want [4]", got)
	}
	m, err := d.Latest()
	if err != nil || m.Config["who"] != "successor" {
		t.Fatalf("latest %+v %v", m, err)
	}
	// The next attempt, on the latest, commits 5 normally.
	if res, err := d.Commit(ctx, CommitRequest{ParentVersion: 4, Kind: Append, Files: []Descriptor{stale}}); err != nil || res.Version != 5 {
		t.Fatalf("commit on the latest: %+v %v", res, err)
	}
}

func versionNumbers(vs []VersionInfo) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

// Versions are removed oldest first, never the latest: a version's parent
// is always gone before it, which is what confirmFresh relies on.
func TestRemoveVersionOldestFirst(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	ctx := testCtx(t)
	for i := 0; i < 2; i++ {
		if _, err := d.Commit(ctx, CommitRequest{ParentVersion: uint64(i + 1), Kind: ConfigOnly, ConfigSet: map[string]string{"n": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.RemoveVersion(ctx, 2); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("remove 2 before 1: %v", err)
	}
	if err := d.RemoveVersion(ctx, 3); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("remove the latest: %v", err)
	}
	for _, v := range []uint64{1, 2} {
		if err := d.RemoveVersion(ctx, v); err != nil {
			t.Fatalf("remove %d: %v", v, err)
		}
	}
	if err := d.RemoveVersion(ctx, 1); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("remove 1 again: %v", err)
	}
}
