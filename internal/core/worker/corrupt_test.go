package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
)

// rollBack publishes table fully (so the WAL trims it), then deletes every
// Lance version from the publication on, as a lost or badly restored copy
// would: the table's watermark is then behind the WAL's trimmed position.
func (e *env) rollBack(table string) {
	e.t.Helper()
	s, err := e.publisher(e.co, "setup", publish.Limits{}).Acquire(e.ctx, table)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := s.Round(e.ctx)
	if err != nil || res.Outcome != publish.OutcomePublished {
		e.t.Fatalf("setup round: %+v %v", res, err)
	}
	if err := s.Release(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	ds, err := lance.Open(filepath.Join(e.lance, table+".lance"))
	if err != nil {
		e.t.Fatal(err)
	}
	versions, err := ds.Versions()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range versions {
		if v.Version >= res.Version {
			if err := os.Remove(v.Path); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// driveClock steps a fake clock by step every 2ms of real time until the
// test ends, so the worker's waits pass; Step can jump it further.
func driveClock(t *testing.T, fc *clocktesting.FakeClock, step time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				fc.Step(step)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// A table whose rounds fail with a data-integrity error (errs.ErrCorrupt:
// here publish.ErrWatermarkBehindTrim) is logged, counted, released and
// retried only after CorruptBackoff on the worker's clock, while the other
// table keeps being published.
func TestCorruptTableDoesNotStopOthers(t *testing.T) {
	e := newEnv(t, 2, "bad", "good")
	e.mustProduce("bad", 0, 3, 20)
	e.rollBack("bad")
	e.mustProduce("bad", 0, 2, 20)
	e.mustProduce("good", 0, 3, 20)
	e.mustProduce("good", 1, 3, 20)

	fc := clocktesting.NewFakeClock(time.Now())
	driveClock(t, fc, 10*time.Millisecond) // the worker's time runs 5× faster
	a := e.start("worker-a", publish.Limits{}, Config{
		Tables:         []string{"bad", "good"},
		PollInterval:   20 * time.Millisecond,
		CorruptBackoff: time.Hour,
		Clock:          fc,
	})
	waitFor(t, 20*time.Second, "good to be published", func() bool { return e.published("good") })
	waitFor(t, 20*time.Second, "bad's corrupt round", func() bool {
		return a.count(a.m.Errors, "bad", string(kindCorrupt)) == 1
	})
	waitFor(t, 5*time.Second, "bad's claim to be released", func() bool {
		_, err := e.co.Get(e.ctx, "bad")
		return errors.Is(err, coord.ErrNoClaim)
	})
	if got := a.count(a.m.ClaimChanges, "bad", EventReleased); got != 1 {
		t.Fatalf("bad released %v times", got)
	}

	// The good table keeps going while bad backs off.
	e.mustProduce("good", 1, 2, 20)
	waitFor(t, 20*time.Second, "good's new records", func() bool { return e.published("good") })
	time.Sleep(300 * time.Millisecond) // 1.5s of worker time: 75 poll intervals
	if got := a.count(a.m.Rounds, "bad", OutcomeFailed); got != 1 {
		t.Fatalf("bad was retried before its backoff: %v failed rounds", got)
	}

	// Once the backoff has passed on the worker's clock, bad is tried again.
	fc.Step(time.Hour)
	waitFor(t, 20*time.Second, "bad's retry after the backoff", func() bool {
		return a.count(a.m.Errors, "bad", string(kindCorrupt)) == 2
	})
	a.stop(t)
	e.exactlyOnce("good")
	e.noClaims()
}
