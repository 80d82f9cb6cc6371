package publish

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
)

// fsyncgate (issue 12 item 3): the directory sync after the data commit's
// link fails. The commit is not resolved by looking the plan id up and
// syncing again: the table stops in this process, says which directory and
// errno, and the WAL is not trimmed. A fresh publisher (a new process)
// re-reads the disk and publishes normally.
func TestFailedSyncAfterLinkStopsTableAndNeverTrims(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 3, 10)
	pub := e.publisher("w")
	s, err := pub.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	ds, err := s.dataset(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 is the fence, 3 the data commit: arm the fsync failpoint
	// once version 3 is linked, so the next fsync is its directory's.
	failDirSyncAfterLink(t, ds, 3)
	_, err = s.Round(e.ctx)
	versions := filepath.Join(e.lance, "orders.lance", "_versions")
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, durable.ErrSyncFailed) || !errors.Is(err, syscall.EIO) ||
		!errors.Is(err, errs.ErrCorrupt) || errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("round with a failed directory sync: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, versions) || !strings.Contains(msg, "input/output error") || !strings.Contains(msg, "orders") {
		t.Fatalf("error does not name the table, the directory and the errno: %v", err)
	}
	if v, _ := ds.LatestVersion(); v != 3 {
		t.Fatalf("latest version %d, want the linked 3", v)
	}
	trimmed := func() uint64 {
		st, err := e.log.Stats(e.ctx, "orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		return st.Shards[0].TrimmedThrough
	}
	if n := trimmed(); n != 0 {
		t.Fatalf("WAL trimmed through %d on the strength of a retried sync", n)
	}

	// The table stays stopped in this publisher: rounds and acquisitions
	// fail at once, nothing is synced again, nothing is trimmed.
	if _, err := s.Round(e.ctx); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("second round: %v", err)
	}
	if err := s.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Acquire(e.ctx, "orders"); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("acquire after the failure: %v", err)
	}
	if n := trimmed(); n != 0 {
		t.Fatalf("WAL trimmed through %d", n)
	}

	// Issue 31 finding 4: the stop holds for the whole fleet. Another
	// process (which reads the same page cache, so its own fsync proves
	// nothing) can neither claim the table nor fence or trim through the
	// suspect version, nor can a holder that already had the claim.
	e.produce(0, 2, 10)
	other := e.publisher("other")
	if _, err := other.Acquire(e.ctx, "orders"); !errors.Is(err, coord.ErrTableStopped) || !strings.Contains(err.Error(), "walctl table resume") {
		t.Fatalf("another process's acquire after the failure: %v; want ErrTableStopped naming the resume command", err)
	}
	stop, err := e.co.Stopped(e.ctx, "orders")
	if err != nil || stop == nil || stop.Owner.ID != "w" || !strings.Contains(stop.Reason, versions) {
		t.Fatalf("stop record: %+v, %v; want one naming the owner w and the directory", stop, err)
	}
	if n := trimmed(); n != 0 {
		t.Fatalf("WAL trimmed through %d by another process", n)
	}

	// An operator repairs the storage and resumes the table (audited): a
	// fresh process publishes again, from what is on disk.
	if _, err := e.co.Resume(e.ctx, coord.ResumeRequest{Table: "orders", Actor: "alice", Reason: "remounted", ExpectRevision: stop.Revision}); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Acquire(e.ctx, "orders"); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("the process that met the failure, after the resume: %v; want it stopped until restarted", err)
	}
	fresh, err := e.publisher("fresh").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Release(context.Background())
	drain(t, e.ctx, fresh)
	e.exactlyOnce(e.tableIDs())
	if n := trimmed(); n != 5 {
		t.Fatalf("fresh publisher trimmed through %d, want 5", n)
	}
}

// The same failure on a fence's directory sync: the fence is not retried.
func TestFailedSyncOnFenceStopsTable(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 1, 10)
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	ds, err := s.dataset(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	failDirSyncAfterLink(t, ds, 0)
	if _, err := s.Round(e.ctx); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("round: %v", err)
	}
	if v, _ := ds.LatestVersion(); v != 2 {
		t.Fatalf("latest version %d: the fence was retried", v)
	}
}

// Issue 31 finding 4, a holder's view: the table is stopped by another
// process's failed fsync while this publisher holds the claim. Its next
// commit and its trim are refused (the claim is validated together with
// the stop record); nothing is committed or trimmed.
func TestStopByAnotherProcessStopsTheHolder(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 2, 10)
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	drain(t, e.ctx, s)
	ds, err := s.dataset(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ds.LatestVersion()
	if _, err := e.co.RecordStop(e.ctx, coord.StopRecord{Table: "orders", Reason: "fsync _versions: EIO", Owner: coord.Owner{ID: "other", Kind: coord.OwnerCLI}}); err != nil {
		t.Fatal(err)
	}
	e.produce(0, 2, 10)
	if _, err := s.Round(e.ctx); !errors.Is(err, coord.ErrTableStopped) {
		t.Fatalf("round of a holder after another process stopped the table: %v", err)
	}
	if v, _ := ds.LatestVersion(); v != before {
		t.Fatalf("version %d committed after the stop (was %d)", v, before)
	}
	st, err := e.log.Stats(e.ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Shards[0].TrimmedThrough; got != 2 {
		t.Fatalf("trimmed through %d, want 2 (the first two batches only)", got)
	}
}

// Issue 31 finding 3: the directory sync after a compaction's Rewrite is
// linked fails. Compact does not resolve the outcome by finding its
// transaction (a later read proves nothing): it fails with the storage
// error and the table stops for the fleet, so the operator's next `table
// clean` cannot remove the versions and files the unsynced version's
// predecessors need.
func TestFailedSyncOnCompactionStopsTable(t *testing.T) {
	e := newEnv(t, 1)
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	for range 3 { // three rounds, three small fragments
		e.produce(0, 1, 10)
		drain(t, e.ctx, s)
	}
	ds, err := s.dataset(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ds.LatestVersion()
	failDirSyncAfterLink(t, ds, 0)
	res, err := s.Compact(e.ctx, 1<<30)
	ds.Hooks.AfterLinkBeforeDirSync = nil
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("compact with a failed directory sync: %+v, %v; want ErrStorageFailed", res, err)
	}
	if len(res.Groups) != 0 {
		t.Fatalf("compact reported groups %+v as done", res.Groups)
	}
	if v, _ := ds.LatestVersion(); v != before+1 {
		t.Fatalf("latest %d, want the linked rewrite %d", v, before+1)
	}
	if _, err := s.Clean(e.ctx, 0); !errors.Is(err, coord.ErrTableStopped) {
		t.Fatalf("clean after the failure: %v; want the table stopped", err)
	}
	if err := s.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.publisher("other").Acquire(e.ctx, "orders"); !errors.Is(err, coord.ErrTableStopped) {
		t.Fatalf("another process's acquire: %v; want the table stopped", err)
	}
	if vs, _ := ds.Versions(); len(vs) != int(before)+1 {
		t.Fatalf("%d versions left, want all %d", len(vs), before+1)
	}
}

// failDirSyncAfterLink makes the directory sync after the link of version
// v (of any version when v is 0) fail once, as a failed fsync of
// _versions.
func failDirSyncAfterLink(t *testing.T, ds *lance.Dataset, v uint64) {
	t.Cleanup(failpoint.Reset)
	ds.Hooks.AfterLinkBeforeDirSync = func(ctx context.Context, linked uint64) error {
		if v != 0 && linked != v {
			return nil
		}
		return failpoint.Enable(durable.FailSync+"=error*1", "")
	}
}
