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

// Issue 31 (found by an adversarial reading): two stale writers, H2 on
// parent 2 and H on parent 3, both paused before their links, while a clean
// removes 1..4 (latest 6 and 5 kept). H2 links 3 (number freed) and, before
// its own check removes it, H links 4. H finds a version 3, but not the one
// it read: its commit reuses a freed number too and is undone. (The check
// used to accept any manifest at the parent's number.)
func TestCommitOntoARefilledParentNumberIsUndone(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	ctx := testCtx(t)
	r := smallBatch(0, 10)
	defer r.Release()
	for i := 0; i < 5; i++ { // versions 2..6
		appendFiles(t, d, map[string]string{"who": "legit"}, writeFile(t, d, r))
	}
	h2, err := OpenStore(d.Store())
	if err != nil {
		t.Fatal(err)
	}
	h, err := OpenStore(d.Store())
	if err != nil {
		t.Fatal(err)
	}
	f2, f := writeFile(t, d, r), writeFile(t, d, r)

	h2Paused, h2Go := make(chan struct{}), make(chan struct{})
	h2Linked, h2Resume := make(chan struct{}), make(chan struct{})
	h2.Hooks.BeforeLink = func(context.Context, uint64) error { close(h2Paused); <-h2Go; return nil }
	h2.Hooks.AfterLinkBeforeDirSync = func(context.Context, uint64) error { close(h2Linked); <-h2Resume; return nil }
	hPaused, hGo := make(chan struct{}), make(chan struct{})
	h.Hooks.BeforeLink = func(context.Context, uint64) error { close(hPaused); <-hGo; return nil }

	h2Err, hErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := h2.Commit(ctx, CommitRequest{ParentVersion: 2, Kind: Append, Files: []Descriptor{f2}, ConfigSet: map[string]string{"who": "stale-h2"}})
		h2Err <- err
	}()
	go func() {
		_, err := h.Commit(ctx, CommitRequest{ParentVersion: 3, Kind: Append, Files: []Descriptor{f}, ConfigSet: map[string]string{"who": "stale-h"}})
		hErr <- err
	}()
	<-h2Paused
	<-hPaused
	// The clean: oldest first, the latest two (5, 6) kept.
	for _, v := range []uint64{1, 2, 3, 4} {
		if err := d.RemoveVersion(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	close(h2Go)
	<-h2Linked // H2's manifest 3 is linked, its confirmFresh not run yet
	close(hGo)
	herr := <-hErr
	close(h2Resume)
	h2err := <-h2Err
	vs, _ := d.Versions()
	if !errors.Is(h2err, ErrVersionReused) {
		t.Fatalf("H2: %v; want ErrVersionReused", h2err)
	}
	if got := versionNumbers(vs); len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Fatalf("versions now %v; want 5 and 6 only", got)
	}
	if herr == nil {
		m, _ := d.Manifest(4)
		t.Fatalf("stale writer H reused version 4 (who=%s): confirmFresh saw H2's transient version 3 as H's parent", m.Config["who"])
	}
	if !errors.Is(herr, ErrVersionReused) {
		t.Fatalf("H: %v", herr)
	}
}

// Issue 31 (found by an adversarial reading): a stale writer on parent 2
// pauses before its link; a clean removes 1..3 (latest two, 4 and 5, kept);
// the writer's link of 3 succeeds but its outcome is unknown (here: the
// hook after the link fails, as a timeout after an S3 PUT would). The
// parent is gone: the version is its, reuses a freed number, and is undone
// (it used to be left for FindTransaction to take as the writer's own).
func TestUnknownOutcomeIntoAFreedNumberIsUndone(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	ctx := testCtx(t)
	r := smallBatch(0, 10)
	defer r.Release()
	for i := 0; i < 4; i++ { // versions 2..5
		appendFiles(t, d, map[string]string{"who": "legit"}, writeFile(t, d, r))
	}
	stale, err := OpenStore(d.Store())
	if err != nil {
		t.Fatal(err)
	}
	f := writeFile(t, d, r)
	stale.Hooks.BeforeLink = func(context.Context, uint64) error {
		for _, v := range []uint64{1, 2, 3} {
			if err := d.RemoveVersion(ctx, v); err != nil {
				return err
			}
		}
		return nil
	}
	stale.Hooks.AfterLinkBeforeDirSync = func(context.Context, uint64) error { return errors.New("answer lost") }
	_, err = stale.Commit(ctx, CommitRequest{ParentVersion: 2, Kind: Append, Files: []Descriptor{f}, TxnID: "stale-txn", ConfigSet: map[string]string{"who": "stale"}})
	if !errors.Is(err, ErrVersionReused) {
		t.Fatalf("commit: %v; want ErrVersionReused", err)
	}
	v, found, ferr := stale.FindTransaction("stale-txn", 2)
	vs, _ := d.Versions()
	if found {
		t.Fatalf("unknown outcome resolved as the stale writer's own version %d (%v); versions %v: a freed number reused and kept", v, ferr, versionNumbers(vs))
	}
}
