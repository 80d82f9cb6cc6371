package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walctl/walctl/internal/core/publish"
)

// After a run the counters reflect what was published: records equal the
// ACKed rows, bytes the WAL bytes, one claim acquired then released, lag
// measured down to zero while held.
func TestMetricsReflectPublishedRows(t *testing.T) {
	e := newEnv(t, 2, "orders")
	e.mustProduce("orders", 0, 6, 25)
	e.mustProduce("orders", 1, 4, 25)
	before, err := e.log.Stats(e.ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	var walBytes int64
	for _, sh := range before.Shards {
		walBytes += sh.PendingBytes
	}
	lim := publish.Limits{MaxBytes: 1 << 30, MaxGenerations: 1, FileBytes: 64 << 10}
	a := e.start("worker-a", lim, Config{Tables: []string{"orders"}, PollInterval: 20 * time.Millisecond})
	waitFor(t, 20*time.Second, "publication", func() bool { return e.published("orders") })
	// The round that published the last generation measured the lag after
	// it; idle rounds keep it at zero.
	waitFor(t, 5*time.Second, "lag to reach zero", func() bool {
		return testutil.CollectAndCount(a.m.LagBytes) == 1 && a.gauge(a.m.LagBytes, "orders") == 0 &&
			a.gauge(a.m.LagGenerations, "orders") == 0
	})
	waitFor(t, 5*time.Second, "an idle round", func() bool {
		return a.count(a.m.Rounds, "orders", string(publish.OutcomeIdle)) > 0
	})
	if held := a.gauge(a.m.ClaimHeld, "orders"); held != 1 {
		t.Fatalf("claim_held = %v while running", held)
	}
	a.stop(t)

	if got := a.count(a.m.Records, "orders"); got != 250 {
		t.Fatalf("records_published_total = %v, want 250", got)
	}
	st, err := e.log.Stats(e.ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range st.Shards {
		if sh.TrimmedThrough != sh.LastPosition {
			t.Fatalf("shard %d not trimmed: %+v", sh.Shard, sh)
		}
	}
	if got := a.count(a.m.Bytes, "orders"); got != float64(walBytes) || walBytes == 0 {
		t.Fatalf("bytes_published_total = %v, the WAL held %d pending bytes", got, walBytes)
	}
	// One generation per round: at least a published round per shard.
	if got := a.count(a.m.Rounds, "orders", string(publish.OutcomePublished)); got < 2 {
		t.Fatalf("published rounds = %v", got)
	}
	for ev, want := range map[string]float64{EventAcquired: 1, EventReleased: 1, EventLost: 0} {
		if got := a.count(a.m.ClaimChanges, "orders", ev); got != want {
			t.Fatalf("claim_changes_total{event=%s} = %v, want %v", ev, got, want)
		}
	}
	if held := a.gauge(a.m.ClaimHeld, "orders"); held != 0 {
		t.Fatalf("claim_held = %v after shutdown", held)
	}
	if n := testutil.CollectAndCount(a.m.LagBytes); n != 0 {
		t.Fatalf("lag still reported for %d tables after the claim ended", n)
	}
	if got := a.count(a.m.Errors, "orders", string(kindOther)); got != 0 {
		t.Fatalf("errors: %v", got)
	}

	// The registry exposes them under walctl_worker_*.
	const want = `
# HELP walctl_worker_records_published_total Records committed to Lance by this worker.
# TYPE walctl_worker_records_published_total counter
walctl_worker_records_published_total{table="orders"} 250
`
	if err := testutil.GatherAndCompare(a.reg, strings.NewReader(want), "walctl_worker_records_published_total"); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"rounds_total", "records_published_total", "bytes_published_total",
		"claim_changes_total", "claim_held"} {
		if !names["walctl_worker_"+n] {
			t.Errorf("walctl_worker_%s not exposed (have %v)", n, names)
		}
	}
}
