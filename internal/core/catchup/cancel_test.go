package catchup_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// A stall cancellation observed at seq N loses when progress is recorded
// between the observation and the CAS (forced by the hook, not timing):
// admission stays open and nothing is terminated.
func TestStaleProgressCancellationLosesToConcurrentAdvance(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	x := e.begin("t1", job)
	fired := 0
	e.store.SetBeforeCancelCAS(func(table string) {
		fired++
		if fired == 1 {
			e.progress(x, catchup.ProgressBatch)
		}
	})
	for i := 0; fired == 0; i++ {
		if i > 200 {
			t.Fatal("no cancellation was attempted")
		}
		e.step("t1", e.policy.ObserveInterval)
	}
	st := e.wantPhase("t1", catchup.PhaseRunning)
	if !st.Progress.AdmissionOpen || st.TerminationRequested || e.runner.CountCalls("terminate ") != 0 {
		t.Fatalf("stale cancellation won: %+v", st)
	}
	if err := e.store.CheckAdmission(e.ctx, "t1", x.ExecID); err != nil {
		t.Fatalf("admission after a defeated cancellation: %v", err)
	}
	// The advance resets the idle window: no stall for another idle period.
	e.step("t1", e.policy.ObserveInterval)
	if o, _ := e.ctrl.Observation("t1"); o.Verdict != catchup.VerdictHealthy {
		t.Fatalf("after the advance: verdict %s", o.Verdict)
	}

	// The operator's cancel applies the same CAS rule.
	e.store.SetBeforeCancelCAS(func(string) { e.progress(x, catchup.ProgressCommit) })
	wantErr(t, e.m.Cancel(e.ctx, "t1", "", "alice"), catchup.ErrProgressAdvanced)
	e.store.SetBeforeCancelCAS(nil)
	e.wantPhase("t1", catchup.PhaseRunning)
	if err := e.m.Cancel(e.ctx, "t1", "operator asked", "alice"); err != nil {
		t.Fatal(err)
	}
	e.wantPhase("t1", catchup.PhaseTerminating)
}

// The startup-phase race: the master decides a Job with no execution has
// stalled while the executor begins one. Beginning rewrites the admission
// record, so the CAS loses; the new execution gets a fresh grace period.
// The other order is safe too: after the cancellation, no execution can
// begin.
func TestStartupPhaseRace(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	var x catchup.Execution
	e.store.SetBeforeCancelCAS(func(string) {
		if x.ExecID == 0 {
			x = e.begin("t1", job)
		}
	})
	e.stepUntilHook(&x.ExecID)
	if got, want := e.clock.Since(t0), e.policy.StartupWindow+e.policy.Confirmation; got != want {
		t.Fatalf("stall decided at %s, want %s", got, want)
	}
	st := e.wantPhase("t1", catchup.PhaseRunning)
	if !st.Progress.AdmissionOpen || st.Progress.ExecID != x.ExecID {
		t.Fatalf("after the race: %+v", st.Progress)
	}
	// A fresh grace: a full startup window without progress is tolerated.
	for i := 0; i < int(e.policy.StartupWindow/e.policy.ObserveInterval); i++ {
		e.step("t1", e.policy.ObserveInterval)
	}
	e.wantPhase("t1", catchup.PhaseRunning)
	if o, _ := e.ctrl.Observation("t1"); o.ExecID != x.ExecID {
		t.Fatalf("observation of execution %d, want %d", o.ExecID, x.ExecID)
	}

	// Reverse order: cancellation first, then the executor starts.
	e2 := newEnv(t, nil)
	job2 := e2.running("t1")
	e2.stepUntil("t1", catchup.PhaseTerminating, 200, nil)
	_, err := e2.store.BeginExecution(e2.ctx, "t1", job2)
	wantErr(t, err, catchup.ErrAdmissionClosed)
}

func (e *env) stepUntilHook(done *uint64) {
	e.t.Helper()
	for i := 0; *done == 0; i++ {
		if i > 200 {
			e.t.Fatal("the hook never ran")
		}
		e.step("t1", e.policy.ObserveInterval)
	}
}

// Cancellation closes admission and persists the termination intent;
// termination survives a runner failure and a master restart, refreshes a
// stale resourceVersion rather than dropping the precondition, and the
// slot stays held until every Pod is terminal.
func TestCancellationTerminationAndSlotRelease(t *testing.T) {
	e := newEnv(t, func(p *catchup.Policy) { p.MaxJobs = 1 })
	job := e.running("t1")
	x := e.begin("t1", job)
	if err := e.m.Cancel(e.ctx, "t1", "operator asked", "alice"); err != nil {
		t.Fatal(err)
	}
	st := e.wantPhase("t1", catchup.PhaseTerminating)
	if st.Progress.AdmissionOpen || !st.TerminationRequested || st.Termination.By != "alice" {
		t.Fatalf("after cancel: %+v", st)
	}
	wantErr(t, e.store.CheckAdmission(e.ctx, "t1", x.ExecID), catchup.ErrAdmissionClosed)
	_, err := e.store.RecordProgress(e.ctx, "t1", x.ExecID, catchup.ProgressBatch)
	wantErr(t, err, catchup.ErrAdmissionClosed)

	e.runner.FailNext("terminate", fmt.Errorf("apiserver timeout: %w", errs.ErrUnavailable))
	if _, err := e.ctrl.ReconcileForTest(e.ctx, "t1"); err == nil {
		t.Fatal("a failed termination was not reported")
	}
	e.wantPhase("t1", catchup.PhaseTerminating)

	// Master restart; meanwhile the Job's resourceVersion moved on.
	e.runner.Touch(job)
	restarted := e.startMaster(e.policy)
	e.reconcile(restarted, "t1")
	if !e.runner.Deleted(job) {
		t.Fatalf("job not terminated: %v", e.runner.Calls())
	}
	st = e.wantPhase("t1", catchup.PhaseTerminating)
	if !st.Termination.Done || *st.Slot != 0 {
		t.Fatalf("after termination: %+v", st)
	}
	e.scan("t2", 1000)
	e.wantDecision(e.admit(restarted, "t2"), catchup.DecisionCapacityExhausted)

	e.runner.PodsGone(job)
	e.reconcile(restarted, "t1")
	st = e.wantPhase("t1", catchup.PhaseIdle)
	if *st.Outcome != catchup.OutcomeCancelled || st.ConsecutiveFailures != 0 || st.Slot != nil {
		t.Fatalf("after release: %+v", st)
	}
	if e.countKeys("/catchup/slots/") != 0 || e.countKeys("/reservations/") != 0 || e.countKeys("/catchup/admission/") != 0 {
		t.Fatal("slot, reservation or admission left behind")
	}
	e.wantDecision(e.admit(restarted, "t2"), catchup.DecisionReserved)
	if e.runner.Created() != 1 {
		t.Fatalf("%d jobs created, want 1", e.runner.Created())
	}
}

// A table cancelled while awaiting handover releases at once: no Job was
// ever created.
func TestCancelWhileAwaitingHandover(t *testing.T) {
	e := newEnv(t, nil)
	e.scan("t1", 1000)
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionReserved)
	if err := e.m.Cancel(e.ctx, "t1", "", "bob"); err != nil {
		t.Fatal(err)
	}
	e.reconcile(e.master, "t1")
	e.wantPhase("t1", catchup.PhaseIdle)
	if len(e.runner.Calls()) != 0 {
		t.Fatalf("runner called: %v", e.runner.Calls())
	}
	wantErr(t, e.m.Cancel(e.ctx, "t1", "", "bob"), catchup.ErrNotActive)
}

// An operator cancels while the Job is being created: the create intent
// was persisted, so the termination finds the Job by its deterministic
// name, records and terminates it, and holds the slot until its Pods end.
func TestCancelDuringJobCreation(t *testing.T) {
	e := newEnv(t, nil)
	e.scan("t1", 1000)
	a := e.admit(e.master, "t1")
	e.wantDecision(a, catchup.DecisionReserved)
	e.runner.OnCreate = func(string) {
		if err := e.m.Cancel(e.ctx, "t1", "changed my mind", "dave"); err != nil {
			t.Error(err)
		}
	}
	e.reconcile(e.master, "t1")
	e.runner.OnCreate = nil
	st := e.wantPhase("t1", catchup.PhaseTerminating)
	if !e.runner.Deleted(*a.JobID) || st.JobUID == nil || !st.Termination.Done || e.runner.Created() != 1 {
		t.Fatalf("job created during cancellation: deleted %v, status %+v, calls %v", e.runner.Deleted(*a.JobID), st, e.runner.Calls())
	}
	e.reconcile(e.master, "t1")
	e.wantPhase("t1", catchup.PhaseTerminating) // Pods still running
	e.runner.PodsGone(*a.JobID)
	e.reconcile(e.master, "t1")
	if st := e.wantPhase("t1", catchup.PhaseIdle); *st.Outcome != catchup.OutcomeCancelled {
		t.Fatalf("outcome %v", *st.Outcome)
	}
}

// Issue 13 item 11: cancelling a Job that already exited 0 (before the
// controller observed it) is refused with ErrAlreadyFinished naming its
// outcome, and the attempt keeps it: success, not "cancelled". A Job that
// ends between the look and the CAS keeps its outcome too.
func TestCancelOfAFinishedJobKeepsItsOutcome(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	e.begin("t1", job)
	e.runner.Finish(job, catchup.JobSucceeded, "exit code 0")
	err := e.ctrl.Cancel(e.ctx, "t1", "too late", "erin")
	wantErr(t, err, catchup.ErrAlreadyFinished)
	wantErr(t, err, errs.ErrConflict)
	if !strings.Contains(err.Error(), "already finished: succeeded at ") {
		t.Fatalf("refusal %q does not say it already finished", err)
	}
	e.wantPhase("t1", catchup.PhaseFinishing)
	wantErr(t, e.ctrl.Cancel(e.ctx, "t1", "again", "erin"), catchup.ErrAlreadyFinished)
	e.runner.PodsGone(job)
	e.reconcile(e.master, "t1")
	if st := e.wantPhase("t1", catchup.PhaseIdle); *st.Outcome != catchup.OutcomeSuccess || e.runner.Deleted(job) {
		t.Fatalf("outcome %v (deleted %v), want success and the Job left alone", *st.Outcome, e.runner.Deleted(job))
	}

	// The race: the Job succeeds after the cancellation's CAS; the
	// controller looks before terminating and keeps the success. A Job
	// that exits with a failure after the CAS (the executor obeying the
	// closed admission) ends as the cancellation it is.
	for _, c := range []struct {
		table   string
		state   catchup.JobState
		want    catchup.Outcome
		deleted bool
	}{
		{"t2", catchup.JobSucceeded, catchup.OutcomeSuccess, false},
		{"t3", catchup.JobFailed, catchup.OutcomeCancelled, true},
	} {
		e.scan(c.table, 1000)
		job := e.running(c.table)
		e.begin(c.table, job)
		if err := e.ctrl.Cancel(e.ctx, c.table, "maintenance", "erin"); err != nil {
			t.Fatal(err)
		}
		e.runner.Finish(job, c.state, "exit")
		e.runner.PodsGone(job)
		e.reconcile(e.master, c.table)
		e.reconcile(e.master, c.table)
		st := e.wantPhase(c.table, catchup.PhaseIdle)
		if *st.Outcome != c.want || st.ConsecutiveFailures != 0 || e.runner.Deleted(job) != c.deleted {
			t.Fatalf("%s ended %s after the CAS: outcome %v, %d failures, deleted %v; want %s, none, %v",
				c.table, c.state, *st.Outcome, st.ConsecutiveFailures, e.runner.Deleted(job), c.want, c.deleted)
		}
	}
}
