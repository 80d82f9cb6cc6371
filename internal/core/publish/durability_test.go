package publish

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
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
	t.Cleanup(failpoint.Reset)
	ds.Hooks.AfterLinkBeforeDirSync = func(ctx context.Context, v uint64) error {
		if v == 3 {
			return failpoint.Enable(durable.FailSync+"=error*1", "")
		}
		return nil
	}
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

	// A fresh process publishes again, from what is on disk.
	e.produce(0, 2, 10)
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
	t.Cleanup(failpoint.Reset)
	ds.Hooks.AfterLinkBeforeDirSync = func(ctx context.Context, v uint64) error {
		return failpoint.Enable(durable.FailSync+"=error*1", "")
	}
	if _, err := s.Round(e.ctx); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("round: %v", err)
	}
	if v, _ := ds.LatestVersion(); v != 2 {
		t.Fatalf("latest version %d: the fence was retried", v)
	}
}
