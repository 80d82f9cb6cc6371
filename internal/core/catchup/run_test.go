package catchup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// eventually polls cond (real time) while stepping the fake clock by step
// whenever the controller is waiting on it.
func (e *env) eventually(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			calls := e.runner.Calls()
			if len(calls) > 12 {
				calls = calls[len(calls)-12:]
			}
			e.t.Fatalf("timed out waiting for %s; last runner calls %v", what, calls)
		}
		if step > 0 && e.clock.HasWaiters() {
			e.clock.Step(step)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Run end to end on the fake runner: the periodic scan admits an owned
// target through Admit, the watch picks the reservation up and the Job is
// created; an API cancel is noticed through the watch and the slot is
// released on a timed requeue once the Pods are gone. Run returns when its
// context ends.
func TestControllerRun(t *testing.T) {
	e := newEnv(t, nil)
	e.src.set("t1", 1000)
	e.src.set("t2", 3)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.ctrl.Run(ctx) }()

	e.eventually("the job of t1", 0, func() bool { return e.runner.Created() == 1 })
	e.eventually("t1 running", 0, func() bool { return e.status("t1").Phase == catchup.PhaseRunning })
	if st := e.status("t2"); st.Active || st.Stats == nil || st.Stats.PendingGenerations != 3 {
		t.Fatalf("t2 (below threshold): %+v", st)
	}
	job := e.runner.Jobs()[0]
	x := e.begin("t1", job)
	e.progress(x, catchup.ProgressBatch)

	if err := e.m.Cancel(e.ctx, "t1", "test", "carol"); err != nil {
		t.Fatal(err)
	}
	e.eventually("termination recorded", 0, func() bool {
		st := e.status("t1")
		return st.Termination != nil && st.Termination.Done
	})
	if st := e.status("t1"); st.Phase != catchup.PhaseTerminating || !e.runner.Deleted(job) {
		t.Fatalf("after termination: %+v", st)
	}
	e.runner.PodsGone(job)
	// Once released, the periodic scan may admit t1 again at once (a
	// cancellation costs no backoff), so wait for the outcome, not idle.
	e.eventually("release", e.policy.ObserveInterval, func() bool {
		st := e.status("t1")
		return st.Outcome != nil && *st.Outcome == catchup.OutcomeCancelled
	})
	if e.countKeys("/catchup/slots/") > 1 {
		t.Fatal("the cancelled job's slot was not released")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
}

// Status JSON: stable field names, null where unknown.
func TestStatusJSON(t *testing.T) {
	e := newEnv(t, nil)
	b, err := json.Marshal(e.status("t1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"target":"t1"`, `"phase":"idle"`, `"job_id":null`, `"job_uid":null`, `"slot":null`,
		`"attempt":null`, `"progress":null`, `"observation":null`, `"termination_requested":false`,
		`"consecutive_failures":0`, `"next_retry":null`, `"needs_attention":false`, `"outcome":null`, `"stats":null`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("status JSON lacks %s: %s", want, b)
		}
	}
	job := e.running("t1")
	x := e.begin("t1", job)
	e.progress(x, catchup.ProgressCommit)
	e.step("t1", e.policy.ObserveInterval)
	st, err := e.ctrl.Status(e.ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(st)
	for _, want := range []string{`"job_id":"` + job + `"`, `"job_uid":"uid-1"`, `"slot":0`, `"attempt":1`,
		`"seq":1`, `"last_kind":"commit"`, `"exec_id":1`, `"verdict":"grace"`, `"pending_generations":1000`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("status JSON lacks %s: %s", want, b)
		}
	}
}

// The scan writes per-table statistics, computed against the published
// watermarks, with their observation time.
func TestScanWritesStats(t *testing.T) {
	e := newEnv(t, nil)
	e.src.set("t1", 300)
	sc := catchup.NewScanner(e.store, e.src, e.src.watermarks)
	rows, err := sc.Scan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].PendingGenerations != 300 || rows[0].Shards[0].Watermark != 7 || !rows[0].ObservedAt.Equal(t0) {
		t.Fatalf("scan rows %+v", rows)
	}
	st, ok, err := e.store.Stats(e.ctx, "t1")
	if err != nil || !ok || st.PendingBytes != 300<<20 || st.OldestPendingAge != 300*time.Second {
		t.Fatalf("stored stats %+v %v %v", st, ok, err)
	}
}

// Two masters run their controllers (and periodic scans) at once: each
// admitted table gets exactly one Job, and capacity holds.
func TestTwoControllersRunning(t *testing.T) {
	e := newEnv(t, func(p *catchup.Policy) { p.MaxJobs = 2 })
	other := e.startMaster(e.policy)
	for _, tb := range []string{"t1", "t2", "t3"} {
		e.src.set(tb, 1000)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 2)
	go func() { done <- e.ctrl.Run(ctx) }()
	go func() { done <- other.ctrl.Run(ctx) }()
	e.eventually("two jobs", 0, func() bool { return e.runner.Created() == 2 })
	e.eventually("both running", 0, func() bool {
		n := 0
		for _, tb := range []string{"t1", "t2", "t3"} {
			if e.status(tb).Phase == catchup.PhaseRunning {
				n++
			}
		}
		return n == 2
	})
	// Let both controllers observe a few more rounds.
	for i := 0; i < 5; i++ {
		e.eventually("a waiting controller", 0, e.clock.HasWaiters)
		e.clock.Step(e.policy.ObserveInterval)
		time.Sleep(20 * time.Millisecond)
	}
	if e.runner.Created() != 2 || e.countKeys("/catchup/slots/") != 2 {
		t.Fatalf("%d jobs, %d slots; want 2 and 2 (calls %v)", e.runner.Created(), e.countKeys("/catchup/slots/"), e.runner.Calls())
	}
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A failed step is not lost: the work queue re-queues the table with
// per-table exponential backoff on the injected clock until the step
// succeeds, and no step runs twice for one failure.
func TestControllerRetriesAFailedStepWithBackoff(t *testing.T) {
	e := newEnv(t, nil)
	e.src.set("t1", 1000)
	unavailable := fmt.Errorf("apiserver timeout: %w", errs.ErrUnavailable)
	e.runner.FailNext("create", unavailable)
	e.runner.FailNext("create", unavailable)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.ctrl.Run(ctx) }()
	e.eventually("the job of t1 after two failed creates", time.Second, func() bool { return e.runner.Created() == 1 })
	e.eventually("t1 running", time.Second, func() bool { return e.status("t1").Phase == catchup.PhaseRunning })
	if n := e.runner.CountCalls("create "); n != 3 {
		t.Fatalf("%d creates, want 3 (two failures, one success): %v", n, e.runner.Calls())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
