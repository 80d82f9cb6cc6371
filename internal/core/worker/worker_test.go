package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
)

// Two workers with short slices race over the same tables while producers
// append to several shards: every ACKed id ends up in each table exactly
// once, and claims change hands between the workers.
func TestTwoWorkersRaceExactlyOnce(t *testing.T) {
	tables := []string{"orders", "events"}
	e := newEnv(t, 3, tables...)
	cfg := Config{
		Tables:       tables,
		PollInterval: 20 * time.Millisecond,
		Slice:        coord.SlicePolicy{MaxRounds: 2},
		IdleRelease:  IdlePolicy{MaxRounds: 3},
	}
	a := e.start("worker-a", publish.Limits{MaxBytes: 1 << 30, MaxGenerations: 2, FileBytes: 64 << 10}, cfg)
	b := e.start("worker-b", publish.Limits{MaxBytes: 1 << 30, MaxGenerations: 2, FileBytes: 64 << 10}, cfg)

	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for _, table := range tables {
		for shard := 0; shard < 3; shard++ {
			wg.Go(func() {
				for burst := 0; burst < 12; burst++ {
					if err := e.produce(table, shard, 3, 40); err != nil {
						errc <- err
						return
					}
					time.Sleep(15 * time.Millisecond) // let rounds interleave with appends
				}
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for _, table := range tables {
		waitFor(t, 40*time.Second, table+" fully published", func() bool { return e.published(table) })
	}
	a.stop(t)
	b.stop(t)
	e.noClaims()

	handedOver := false
	for _, table := range tables {
		e.exactlyOnce(table)
		acqA := a.count(a.m.ClaimChanges, table, EventAcquired)
		acqB := b.count(b.m.ClaimChanges, table, EventAcquired)
		recs := a.count(a.m.Records, table) + b.count(b.m.Records, table)
		t.Logf("%s: acquisitions a=%v b=%v, records a=%v b=%v, acked %d", table, acqA, acqB,
			a.count(a.m.Records, table), b.count(b.m.Records, table), e.ackedCount(table))
		if acqA > 0 && acqB > 0 {
			handedOver = true
		}
		// Every ACKed record was committed once, by one of the two (none
		// was lost to an interrupted round in this test).
		if int(recs) != e.ackedCount(table) {
			t.Errorf("%s: workers report %v records published, %d ACKed", table, recs, e.ackedCount(table))
		}
	}
	if !handedOver {
		t.Fatal("no table was held by both workers: claims never changed hands")
	}
}

// Revoking the holder's claim stops it publishing the table at once; the
// other worker takes over and publishes the rest, exactly once.
func TestRevokedHolderStopsAndOtherTakesOver(t *testing.T) {
	e := newEnv(t, 2, "orders")
	cfg := Config{
		Tables:       []string{"orders"},
		PollInterval: 20 * time.Millisecond,
		Slice:        coord.SlicePolicy{MaxDuration: time.Hour},
		IdleRelease:  IdlePolicy{MaxRounds: 1 << 30},
	}
	e.mustProduce("orders", 0, 4, 50)
	e.mustProduce("orders", 1, 4, 50)
	a := e.start("worker-a", publish.Limits{}, cfg)
	waitFor(t, 20*time.Second, "a to publish", func() bool { return e.published("orders") })
	b := e.start("worker-b", publish.Limits{}, cfg)
	holder, err := e.co.Get(e.ctx, "orders")
	if err != nil || holder.Owner.ID != "worker-a" {
		t.Fatalf("claim: %+v %v, want worker-a's", holder, err)
	}

	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test", Reason: "handover"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "a to see its claim lost", func() bool {
		return a.count(a.m.ClaimChanges, "orders", EventLost) == 1
	})
	if held := a.gauge(a.m.ClaimHeld, "orders"); held != 0 {
		t.Fatalf("a still reports the claim held: %v", held)
	}
	aRecords := a.count(a.m.Records, "orders")
	// New work: b, which never held the table, claims it; a leaves it alone
	// for LostBackoff after its claim was revoked.
	e.mustProduce("orders", 0, 3, 50)
	e.mustProduce("orders", 1, 3, 50)
	waitFor(t, 10*time.Second, "b to take the table over", func() bool {
		ci, err := e.co.Get(e.ctx, "orders")
		return err == nil && ci.Owner.ID == "worker-b" && ci.Epoch != 0 // epoch recorded after the claim
	})
	successor, _ := e.co.Get(e.ctx, "orders")
	if successor.Epoch <= holder.Epoch {
		t.Fatalf("successor epoch %d not above %d", successor.Epoch, holder.Epoch)
	}

	waitFor(t, 20*time.Second, "b to publish the rest", func() bool { return e.published("orders") })
	a.stop(t)
	b.stop(t)
	if got := a.count(a.m.Records, "orders"); got != aRecords {
		t.Fatalf("a published %v records after losing its claim (had %v)", got-aRecords, aRecords)
	}
	if a.count(a.m.ClaimChanges, "orders", EventAcquired) != 1 {
		t.Fatalf("a re-acquired the table: %v acquisitions", a.count(a.m.ClaimChanges, "orders", EventAcquired))
	}
	if b.count(b.m.Records, "orders") != 300 {
		t.Fatalf("b published %v records, want 300", b.count(b.m.Records, "orders"))
	}
	r, err := publish.OpenReader(e.lance, "orders", publish.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if r.State.Epoch != successor.Epoch {
		t.Fatalf("table fenced at epoch %d, successor has %d", r.State.Epoch, successor.Epoch)
	}
	e.exactlyOnce("orders")
	e.noClaims()
}

// Cancelling Run while work is pending: Run returns nil after joining,
// every claim is released, work is left, and a new worker publishes the
// rest exactly once.
func TestShutdownReleasesClaimsAndSuccessorFinishes(t *testing.T) {
	e := newEnv(t, 2, "orders", "events")
	for shard := 0; shard < 2; shard++ {
		for g := 0; g < 12; g++ {
			e.mustProduce("orders", shard, 2, 30)
			e.mustProduce("events", shard, 2, 30)
		}
	}
	one := publish.Limits{MaxBytes: 1 << 30, MaxGenerations: 1, FileBytes: 64 << 10}
	cfg := Config{Tables: []string{"orders", "events"}, PollInterval: 20 * time.Millisecond, MaxConcurrentRounds: 1}
	a := e.start("worker-a", one, cfg)
	waitFor(t, 20*time.Second, "a first publication", func() bool {
		return a.count(a.m.Records, "orders")+a.count(a.m.Records, "events") > 0
	})
	start := time.Now()
	a.stop(t)
	t.Logf("Run returned %s after cancellation", time.Since(start))
	e.noClaims()
	for _, table := range []string{"orders", "events"} {
		if a.count(a.m.ClaimChanges, table, EventAcquired) != a.count(a.m.ClaimChanges, table, EventReleased) {
			t.Fatalf("%s: acquired %v, released %v", table, a.count(a.m.ClaimChanges, table, EventAcquired),
				a.count(a.m.ClaimChanges, table, EventReleased))
		}
	}
	if e.pendingGenerations("orders")+e.pendingGenerations("events") == 0 {
		t.Fatal("no work was pending at shutdown: the test proves nothing")
	}

	b := e.start("worker-b", publish.Limits{}, cfg)
	for _, table := range []string{"orders", "events"} {
		waitFor(t, 30*time.Second, table+" published by b", func() bool { return e.published(table) })
	}
	b.stop(t)
	e.exactlyOnce("orders")
	e.exactlyOnce("events")
	e.noClaims()
}

// An idle table is released after IdleRelease and not claimed again (each
// claim fences: a Lance version) until the WAL has sealed work for it.
func TestIdleTableIsReleasedAndNotClaimedAgain(t *testing.T) {
	e := newEnv(t, 1, "orders", "empty")
	e.mustProduce("orders", 0, 2, 10)
	a := e.start("worker-a", publish.Limits{}, Config{
		Tables:       []string{"orders", "empty"},
		PollInterval: 10 * time.Millisecond,
		IdleRelease:  IdlePolicy{MaxRounds: 2},
	})
	waitFor(t, 20*time.Second, "idle release", func() bool {
		return a.count(a.m.ClaimChanges, "orders", EventReleased) == 1
	})
	if !e.published("orders") {
		t.Fatal("released before publishing")
	}
	time.Sleep(300 * time.Millisecond) // 30 poll intervals
	if got := a.count(a.m.ClaimChanges, "orders", EventAcquired); got != 1 {
		t.Fatalf("the idle table was claimed %v times", got)
	}
	if got := a.count(a.m.ClaimChanges, "empty", EventAcquired); got != 0 {
		t.Fatalf("a table that never had data was claimed %v times", got)
	}

	e.mustProduce("orders", 0, 1, 10)
	waitFor(t, 20*time.Second, "the new work to be published", func() bool { return e.published("orders") })
	a.stop(t)
	if got := a.count(a.m.ClaimChanges, "orders", EventAcquired); got != 2 {
		t.Fatalf("claimed %v times, want 2 (start, new work)", got)
	}
	e.exactlyOnce("orders")
	e.noClaims()
}

// With MaxConcurrentTables 1 the worker never holds two claims at once, and
// every table still gets its turn (slices and idle release rotate the slot).
func TestMaxConcurrentTablesBoundsClaims(t *testing.T) {
	tables := []string{"t1", "t2", "t3"}
	e := newEnv(t, 1, tables...)
	for _, table := range tables {
		for g := 0; g < 4; g++ {
			e.mustProduce(table, 0, 2, 10)
		}
	}
	a := e.start("worker-a", publish.Limits{MaxBytes: 1 << 30, MaxGenerations: 1, FileBytes: 64 << 10}, Config{
		Tables:              tables,
		MaxConcurrentTables: 1,
		PollInterval:        10 * time.Millisecond,
		IdleRelease:         IdlePolicy{MaxRounds: 2},
	})

	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	maxHeld := 0
	wg.Go(func() {
		for ctx.Err() == nil {
			held := 0
			for _, table := range tables {
				held += int(a.gauge(a.m.ClaimHeld, table))
			}
			maxHeld = max(maxHeld, held)
			time.Sleep(2 * time.Millisecond)
		}
	})
	for _, table := range tables {
		waitFor(t, 30*time.Second, table+" published", func() bool { return e.published(table) })
	}
	cancel()
	wg.Wait()
	a.stop(t)
	if maxHeld != 1 {
		t.Fatalf("held up to %d claims at once, MaxConcurrentTables is 1", maxHeld)
	}
	for _, table := range tables {
		e.exactlyOnce(table)
	}
	e.noClaims()
}
