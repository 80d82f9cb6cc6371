package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("round of orders: %w", err) }
	for _, tc := range []struct {
		name     string
		err      error
		claimErr error
		shutdown bool
		want     errorKind
	}{
		{"newer epoch", wrap(publish.ErrFenced), nil, false, kindFenced},
		{"claim revoked", wrap(coord.ErrNotOwner), nil, false, kindFenced},
		{"stale epoch at trim", wrap(wal.ErrStaleEpoch), nil, false, kindFenced},
		// A round cancelled by its claim's context reports the context's
		// error; the claim's own Err says what happened.
		{"cancelled by claim loss", wrap(context.Canceled), coord.ErrLeaseExpired, false, kindFenced},
		{"cancelled after the grace", wrap(context.Canceled), nil, true, kindShutdown},
		{"cancelled, not by us", wrap(context.Canceled), nil, false, kindOther},
		{"files damaged", wrap(publish.ErrFilesDamaged), nil, false, kindFilesDamaged},
		{"watermark behind trim", wrap(publish.ErrWatermarkBehindTrim), nil, false, kindCorrupt},
		{"corrupt WAL entry", wrap(wal.ErrCorruptEntry), nil, false, kindCorrupt},
		{"unknown record", wrap(coord.ErrUnknownRecord), nil, false, kindCorrupt},
		{"commit contended", wrap(fmt.Errorf("still contended: %w", errs.ErrConflict)), nil, false, kindConflict},
		{"lance conflict", wrap(lance.ErrCommitConflict), nil, false, kindConflict},
		{"epoch CAS lost", wrap(wal.ErrEpochConflict), nil, false, kindConflict},
		{"commit unknown", wrap(lance.ErrCommitUnknown), nil, false, kindUnavailable},
		{"etcd down", wrap(fmt.Errorf("etcd: %w", errs.ErrUnavailable)), nil, false, kindUnavailable},
		{"WAL server not answering", wrap(fmt.Errorf("stats: %w", walflight.ErrServerUnavailable)), nil, false, kindWALUnavailable},
		{"unknown table", wrap(wal.ErrUnknownTable), nil, false, kindNotFound},
		{"bad range", wrap(wal.ErrBadRange), nil, false, kindInvalid},
		{"anything else", errors.New("disk on fire"), nil, false, kindOther},
		// A failed fsync stops the table even when the claim is gone too.
		{"storage failed", wrap(&publish.StorageError{Table: "t", Err: fmt.Errorf("x: %w", durable.ErrSyncFailed)}), coord.ErrLeaseExpired, false, kindStorage},
		// Another process's failed fsync: released, looked at again later.
		{"stopped by another process", wrap(&coord.StopError{Info: coord.StopInfo{StopRecord: coord.StopRecord{Table: "t"}}}), nil, false, kindStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err, tc.claimErr, tc.shutdown); got != tc.want {
				t.Fatalf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
	for _, k := range []errorKind{kindCorrupt, kindNotFound, kindInvalid} {
		if !k.severe() {
			t.Errorf("%s is not severe", k)
		}
	}
	for _, k := range []errorKind{kindFenced, kindShutdown, kindConflict, kindUnavailable, kindWALUnavailable, kindFilesDamaged, kindStopped, kindOther} {
		if k.severe() {
			t.Errorf("%s is severe", k)
		}
	}
	if !busy(fmt.Errorf("x: %w", coord.ErrClaimed)) || !busy(coord.ErrReserved) || busy(coord.ErrNotOwner) {
		t.Fatal("busy misclassifies")
	}
}

func TestBackoffDoublesToItsCap(t *testing.T) {
	b := backoff{base: time.Second, max: 5 * time.Second}
	var got []time.Duration
	for i := 0; i < 5; i++ {
		got = append(got, b.next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
	b.reset()
	if d := b.next(); d != time.Second {
		t.Fatalf("after reset: %v", d)
	}
}

func TestHoldPolicy(t *testing.T) {
	p := holdPolicy{
		slice: coord.SlicePolicy{MaxRounds: 10, MaxDuration: time.Minute},
		idle:  IdlePolicy{MaxRounds: 3, MaxDuration: 5 * time.Second},
	}
	for _, tc := range []struct {
		rounds int
		held   time.Duration
		want   bool
	}{{0, 0, false}, {9, 59 * time.Second, false}, {10, 0, true}, {1, time.Minute, true}} {
		if got := p.sliceOver(tc.rounds, tc.held); got != tc.want {
			t.Errorf("sliceOver(%d, %s) = %v", tc.rounds, tc.held, got)
		}
	}
	for _, tc := range []struct {
		rounds int
		idle   time.Duration
		want   bool
	}{{0, time.Hour, false}, {2, 4 * time.Second, false}, {3, 0, true}, {1, 5 * time.Second, true}} {
		if got := p.idleOver(tc.rounds, tc.idle); got != tc.want {
			t.Errorf("idleOver(%d, %s) = %v", tc.rounds, tc.idle, got)
		}
	}
	if (holdPolicy{}).sliceOver(1<<30, 1<<60) {
		t.Error("an unbounded slice ended")
	}
}

func TestConfigDefaults(t *testing.T) {
	var log wal.Log = (*wal.Engine)(nil)
	cfg, err := Config{Tables: []string{"a", "b", "c"}, Log: log}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrentTables != 3 || cfg.MaxConcurrentRounds < 1 || cfg.PollInterval != DefaultPollInterval ||
		cfg.IdleRelease.MaxRounds != DefaultIdleReleaseRounds || cfg.Slice.MaxDuration != DefaultSliceDuration ||
		cfg.ShutdownGrace != DefaultShutdownGrace || cfg.CorruptBackoff != DefaultCorruptBackoff ||
		cfg.Clock == nil || cfg.Logger == nil || cfg.Metrics == nil {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg, err = Config{Tables: []string{"a"}, Log: log, PollInterval: time.Minute, ErrorBackoff: time.Second, ShutdownGrace: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ErrorBackoff != time.Minute || cfg.ShutdownGrace != -1 {
		t.Fatalf("ErrorBackoff %s (never below PollInterval), ShutdownGrace %s (negative kept)", cfg.ErrorBackoff, cfg.ShutdownGrace)
	}
	for _, bad := range []Config{
		{Log: log},
		{Tables: []string{"a", "a"}, Log: log},
		{Tables: []string{"a/b"}, Log: log},
		{Tables: []string{"a"}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v, want invalid", bad, err)
		}
	}
}

func TestRunRejectsBadConfigBeforeDoingAnything(t *testing.T) {
	// nil Publisher and Client: Run must fail on the config before using them.
	if err := New(nil, nil, Config{Tables: []string{"orders", "orders"}}).Run(context.Background()); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Run: %v, want invalid", err)
	}
}

// Issue 13: a table the WAL does not know is refused at start, by name,
// as not found — not retried for ever.
func TestRunRefusesUnknownTable(t *testing.T) {
	e := newEnv(t, 1, "orders")
	w := New(e.publisher(e.co, "worker-a", publish.Limits{}), e.co, Config{Tables: []string{"orders", "ordres"}, Log: e.log})
	err := w.Run(e.ctx)
	if !errors.Is(err, wal.ErrUnknownTable) || !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "ordres") {
		t.Fatalf("Run: %v, want unknown table ordres", err)
	}
	e.noClaims()
}
