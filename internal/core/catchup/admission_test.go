package catchup_test

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
)

// Two masters (separate etcd connections) racing to admit the same table
// reserve it once; every other request coalesces; the controllers of both
// create exactly one Job.
func TestTwoMastersRacingAdmitOneJob(t *testing.T) {
	e := newEnv(t, nil)
	other := e.startMaster(e.policy)
	e.scan("t1", 1000)
	var mu sync.Mutex
	count := map[catchup.Decision]int{}
	jobs := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		mm := e.master
		if i%2 == 1 {
			mm = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := mm.m.Admit(e.ctx, catchup.Request{Target: "t1", Source: "api"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			count[a.Decision]++
			jobs[*a.JobID] = true
		}()
	}
	wg.Wait()
	if count[catchup.DecisionReserved] != 1 || count[catchup.DecisionAlreadyActive] != 7 || len(jobs) != 1 {
		t.Fatalf("decisions %v, job ids %v; want 1 reserved, 7 already_active, one job", count, jobs)
	}
	if n := e.countKeys("/catchup/slots/"); n != 1 {
		t.Fatalf("%d slots held, want 1", n)
	}
	e.reconcile(other, "t1")
	e.reconcile(e.master, "t1")
	e.reconcile(other, "t1")
	if e.runner.Created() != 1 {
		t.Fatalf("%d jobs created, want 1: %v", e.runner.Created(), e.runner.Calls())
	}
}

// Two masters admitting six tables at once against two slots: exactly two
// are reserved, the rest see capacity exhausted, and two slot keys exist.
func TestCapacityHoldsUnderRace(t *testing.T) {
	e := newEnv(t, func(p *catchup.Policy) { p.MaxJobs = 2 })
	other := e.startMaster(e.policy)
	for _, tb := range e.policy.OwnedTargets {
		e.scan(tb, 1000)
	}
	var mu sync.Mutex
	count := map[catchup.Decision]int{}
	var wg sync.WaitGroup
	for _, mm := range []*master{e.master, other} {
		for _, tb := range e.policy.OwnedTargets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := mm.m.Admit(e.ctx, catchup.Request{Target: tb, Source: "scan"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				count[a.Decision]++
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if count[catchup.DecisionReserved] != 2 {
		t.Fatalf("decisions %v, want exactly 2 reserved", count)
	}
	if count[catchup.DecisionReserved]+count[catchup.DecisionAlreadyActive]+count[catchup.DecisionCapacityExhausted] != 12 {
		t.Fatalf("decisions %v, want only reserved, already_active, capacity_exhausted", count)
	}
	if n := e.countKeys("/catchup/slots/"); n != 2 {
		t.Fatalf("%d slots held, want 2", n)
	}
	if n := e.countKeys("/reservations/"); n != 2 {
		t.Fatalf("%d reservations, want 2", n)
	}
}

// A reservation excludes ordinary claims and admits only the executor
// with exactly the reserved Job identity.
func TestWrongJobIdentityCannotClaim(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	wrong := coord.Owner{ID: "x-1", Kind: coord.OwnerCatchup, JobID: catchup.JobName(e.prefix, "t1", 2)}
	if _, err := e.c.Acquire(e.ctx, "t1", wrong); !errors.Is(err, coord.ErrReserved) {
		t.Fatalf("claim with wrong job id: %v, want ErrReserved", err)
	}
	worker := coord.Owner{ID: "w-1", Kind: coord.OwnerWorker, Host: "h", PID: os.Getpid()}
	if _, err := e.c.Acquire(e.ctx, "t1", worker); !errors.Is(err, coord.ErrReserved) {
		t.Fatalf("worker claim of a reserved table: %v, want ErrReserved", err)
	}
	if _, err := e.store.BeginExecution(e.ctx, "t1", wrong.JobID); !errors.Is(err, catchup.ErrWrongExecution) {
		t.Fatalf("begin execution with wrong job id: %v, want ErrWrongExecution", err)
	}
	right := coord.Owner{ID: "x-2", Kind: coord.OwnerCatchup, JobID: job}
	cl, err := e.c.Acquire(e.ctx, "t1", right)
	if err != nil {
		t.Fatalf("claim with the reserved job id: %v", err)
	}
	defer cl.Release(e.ctx)
	// The executor's own claim is not a worker awaiting handover.
	if st := e.status("t1"); st.AwaitingHandover {
		t.Fatal("the executor's own claim reported as awaiting handover")
	}
}

// A worker holding the claim is not evicted: the reservation is written
// (awaiting handover) but no Job is created until the worker releases.
func TestWorkerHoldingClaimIsNotEvicted(t *testing.T) {
	e := newEnv(t, nil)
	worker := coord.Owner{ID: "w-1", Kind: coord.OwnerWorker, Host: "h", PID: os.Getpid()}
	cl, err := e.c.Acquire(e.ctx, "t1", worker)
	if err != nil {
		t.Fatal(err)
	}
	e.scan("t1", 1000)
	a := e.admit(e.master, "t1")
	e.wantDecision(a, catchup.DecisionAwaitingHandover)
	for i := 0; i < 3; i++ {
		e.step("t1", e.policy.ObserveInterval)
	}
	if e.runner.CountCalls("create ") != 0 {
		t.Fatalf("job created while a worker holds the claim: %v", e.runner.Calls())
	}
	if err := cl.Valid(e.ctx); err != nil {
		t.Fatalf("worker's claim was disturbed: %v", err)
	}
	st := e.wantPhase("t1", catchup.PhaseReserved)
	if !st.AwaitingHandover || *st.JobID != *a.JobID {
		t.Fatalf("status %+v: want awaiting handover for %s", st, *a.JobID)
	}
	if err := cl.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The worker cannot come back: the reservation excludes it.
	if _, err := e.c.Acquire(e.ctx, "t1", worker); !errors.Is(err, coord.ErrReserved) {
		t.Fatalf("worker re-claim: %v, want ErrReserved", err)
	}
	// The master restarted while awaiting handover: the new one creates
	// the reserved Job, under the reserved name.
	restarted := e.startMaster(e.policy)
	e.reconcile(restarted, "t1")
	st = e.wantPhase("t1", catchup.PhaseRunning)
	if e.runner.Created() != 1 || st.JobUID == nil || e.runner.Jobs()[0] != *a.JobID {
		t.Fatalf("after handover: %d jobs, status %+v", e.runner.Created(), st)
	}
}

// Every decision of the one admission path, against real etcd.
func TestAdmissionDecisions(t *testing.T) {
	e := newEnv(t, func(p *catchup.Policy) { p.MaxJobs = 1 })
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionNoStats)
	e.wantDecision(e.admit(e.master, "other"), catchup.DecisionNotOwned)
	e.scan("t1", 10)
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionBelowThreshold)
	e.scan("t1", 256)
	e.clock.Step(e.policy.StatsMaxAge + 1)
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionStaleStats)
	e.scan("t1", 256)
	a, err := e.m.Admit(e.ctx, catchup.Request{Target: "t1", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	e.wantDecision(a, catchup.DecisionEligible)
	if *a.JobID != catchup.JobName(e.prefix, "t1", 1) || e.countKeys("/reservations/") != 0 {
		t.Fatalf("dry run: job %v, %d reservations; want the would-be job and none written", *a.JobID, e.countKeys("/reservations/"))
	}
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionReserved)
	e.scan("t2", 1000)
	e.wantDecision(e.admit(e.master, "t2"), catchup.DecisionCapacityExhausted)
	if _, err := e.m.Admit(e.ctx, catchup.Request{Target: "../etc"}); err == nil {
		t.Fatal("a table name with a path separator was accepted")
	}

	off := newEnv(t, func(p *catchup.Policy) { p.Enabled = false })
	off.scan("t1", 1000)
	off.wantDecision(off.admit(off.master, "t1"), catchup.DecisionDisabled)
}

// A master starting with another policy fails closed, naming the fields.
func TestPolicyMismatchFailsClosed(t *testing.T) {
	e := newEnv(t, nil)
	p := e.policy
	p.MaxJobs = 9
	p.OwnedTargets = []string{"t1"}
	_, err := e.tryMaster(p)
	var pm *catchup.PolicyMismatchError
	if !errors.As(err, &pm) || !errors.Is(err, catchup.ErrPolicyMismatch) {
		t.Fatalf("error %v, want a PolicyMismatchError", err)
	}
	if got := pm.Fields; len(got) != 2 || got[0] != "max_jobs" || got[1] != "owned_targets" {
		t.Fatalf("differing fields %v, want [max_jobs owned_targets]", got)
	}
	// The same policy in another order is the same policy.
	same := e.policy
	same.OwnedTargets = []string{"t6", "t5", "t4", "t3", "t2", "t1", "t1"}
	if _, err := e.tryMaster(same); err != nil {
		t.Fatalf("same policy: %v", err)
	}
}
