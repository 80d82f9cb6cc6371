package publish

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// Issue 31 (found by an adversarial reading): `table clean` fences first;
// the directory sync after its fence's link fails. The table stops for the
// fleet as it does after a publisher's or a compactor's failed fsync: the
// next owner neither fences on the suspect version nor trims through it.
func TestFailedSyncOnCleansFenceStopsTable(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 2, 10)
	w, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e.ctx, w)
	if err := w.Release(e.ctx); err != nil {
		t.Fatal(err)
	}

	cleaner := e.publisher("cleaner")
	c, err := cleaner.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := c.dataset(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ds.LatestVersion()
	failDirSyncAfterLink(t, ds, 0)
	_, err = c.Clean(e.ctx, 0)
	ds.Hooks.AfterLinkBeforeDirSync = nil
	if !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("clean with a failed fence dir sync: %v", err)
	}
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("clean with a failed fence dir sync: %v; want ErrStorageFailed (exit 6)", err)
	}
	if v, _ := ds.LatestVersion(); v != before+1 {
		t.Fatalf("latest %d, want the linked fence %d", v, before+1)
	}
	_ = c.Release(e.ctx)

	stop, serr := e.co.Stopped(e.ctx, "orders")
	e.produce(0, 2, 10)
	next, aerr := e.publisher("next").Acquire(e.ctx, "orders")
	if stop == nil || !errors.Is(aerr, coord.ErrTableStopped) {
		if aerr == nil {
			defer next.Release(context.Background())
			drain(t, e.ctx, next)
		}
		st, _ := e.log.Stats(e.ctx, "orders", nil)
		t.Fatalf("stop %+v (%v), next owner's acquire %v; WAL trimmed through %d (the suspect fence is version %d)",
			stop, serr, aerr, st.Shards[0].TrimmedThrough, before+1)
	}
}

// Issue 31 (found by an adversarial reading): the fleet-wide stop cannot be
// written when the fsync fails (etcd unreachable for that moment). The
// publisher keeps trying in the background, and Release keeps the claim
// until the stop is written, so no other process claims the table, fences
// on the suspect version or trims through it meanwhile.
func TestUnrecordedStopIsRetriedAndKeepsTheClaim(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 3, 10)
	pub := e.publisher("w")
	orig := pub.stopped.record
	var failed atomic.Bool
	pub.stopped.record = func(se *StorageError) error {
		if failed.CompareAndSwap(false, true) {
			return fmt.Errorf("etcd unreachable: %w", errs.ErrUnavailable)
		}
		return orig(se)
	}
	s, err := pub.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.dataset(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	failDirSyncAfterLink(t, ds, 3)
	_, err = s.Round(e.ctx)
	var se *StorageError
	if !errors.As(err, &se) || se.Recorded() {
		t.Fatalf("round: %v", err)
	}
	// What the worker does: classify kindStorage, stop the loop, release.
	// A release that cannot wait keeps the claim.
	short, cancel := context.WithTimeout(e.ctx, 10*time.Millisecond)
	defer cancel()
	if err := s.Release(short); err == nil || s.Claim().Err() != nil {
		t.Fatalf("release before the stop is recorded: %v (claim %v); want an error and the claim kept", err, s.Claim().Err())
	}
	if err := s.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !se.Recorded() {
		t.Fatal("released before the stop was recorded")
	}
	e.produce(0, 2, 10)
	if _, err := e.publisher("other").Acquire(e.ctx, "orders"); !errors.Is(err, coord.ErrTableStopped) {
		t.Fatalf("another process's acquire: %v; want the table stopped", err)
	}
	if st, _ := e.log.Stats(e.ctx, "orders", nil); st.Shards[0].TrimmedThrough != 0 {
		t.Fatalf("WAL trimmed through %d", st.Shards[0].TrimmedThrough)
	}
}

// Issue 31 (found by an adversarial reading): a stop recorded after the
// compactor fenced keeps it from committing a Rewrite: its claim is
// validated with the stop before each commit.
func TestCompactRespectsAFleetStop(t *testing.T) {
	e := newEnv(t, 1)
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	for range 3 {
		e.produce(0, 1, 10)
		drain(t, e.ctx, s)
	}
	ds, _ := s.dataset(e.ctx)
	before, _ := ds.LatestVersion()
	if _, err := e.co.RecordStop(e.ctx, coordStop("orders")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Compact(e.ctx, 1<<30)
	after, _ := ds.LatestVersion()
	if !errors.Is(err, coord.ErrTableStopped) || after != before {
		t.Fatalf("compaction on a table stopped for the fleet: groups %+v, err %v; latest %d -> %d", res.Groups, err, before, after)
	}
}

func coordStop(table string) coord.StopRecord {
	return coord.StopRecord{Table: table, Reason: "fsync _versions: EIO", Owner: coord.Owner{ID: "other", Kind: coord.OwnerCLI}}
}
