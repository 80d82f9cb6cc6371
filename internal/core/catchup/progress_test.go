package catchup_test

import (
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
)

// stepUntil samples table every observe interval until its phase is want,
// and returns the time elapsed; it fails after limit steps.
func (e *env) stepUntil(table string, want catchup.Phase, limit int, each func(i int)) time.Duration {
	e.t.Helper()
	start := e.clock.Now()
	for i := 1; i <= limit; i++ {
		if each != nil {
			each(i)
		}
		e.step(table, e.policy.ObserveInterval)
		if e.status(table).Phase == want {
			return e.clock.Since(start)
		}
	}
	e.t.Fatalf("table %s not %s after %d observations", table, want, limit)
	return 0
}

// Heartbeats keep arriving but progress does not: the Job is cancelled
// exactly at grace end plus confirmation. A heartbeat is not a progress
// kind.
func TestUnchangedHeartbeatsDoNotCount(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	x := e.begin("t1", job)
	e.progress(x, catchup.ProgressBatch)
	if _, err := e.store.RecordProgress(e.ctx, "t1", x.ExecID, "heartbeat"); err == nil {
		t.Fatal("a heartbeat was accepted as progress")
	}
	heartbeat := func(int) {
		if err := e.store.Heartbeat(e.ctx, "t1", x.ExecID); err != nil {
			t.Fatal(err)
		}
	}
	// The execution is first sampled 30 s in: grace until 30+1800 s, then
	// suspect, then stalled one confirmation window (60 s) later.
	took := e.stepUntil("t1", catchup.PhaseTerminating, 200, heartbeat)
	if want := 30*time.Second + e.policy.StartupWindow + e.policy.Confirmation; took != want {
		t.Fatalf("stall declared after %s, want %s", took, want)
	}
	st := e.status("t1")
	if st.Progress.AdmissionOpen || !st.TerminationRequested || st.Termination.ObservedSeq != 1 {
		t.Fatalf("status after stall: %+v", st)
	}
	if st.Progress.HeartbeatAt == nil {
		t.Fatal("heartbeats are not shown in status")
	}
	wantErr(t, e.store.CheckAdmission(e.ctx, "t1", x.ExecID), catchup.ErrAdmissionClosed)
}

// A Job that keeps making progress runs far past the soft slice; when it
// stops, it is cancelled idle + confirmation after its last progress.
func TestProgressBeyondSoftSliceKeepsJobAlive(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	x := e.begin("t1", job)
	steps := int(3*e.policy.SoftSlice/e.policy.ObserveInterval) + 1
	for i := 1; i <= steps; i++ {
		if i%15 == 0 { // every 7.5 minutes, under the 10-minute idle window
			e.progress(x, catchup.ProgressCommit)
		}
		e.step("t1", e.policy.ObserveInterval)
	}
	st := e.wantPhase("t1", catchup.PhaseRunning)
	if e.runner.CountCalls("terminate ") != 0 || !st.Progress.AdmissionOpen {
		t.Fatalf("a progressing job was disturbed after %s: %+v", time.Duration(steps)*e.policy.ObserveInterval, st)
	}
	e.progress(x, catchup.ProgressBatch)
	// The master measures idleness from the sample that saw the progress
	// (its own clock), one interval after it was recorded here.
	took := e.stepUntil("t1", catchup.PhaseTerminating, 100, nil)
	if want := e.policy.ObserveInterval + e.policy.Idle + e.policy.Confirmation; took != want {
		t.Fatalf("stall declared %s after the last progress, want %s", took, want)
	}
}

// A gap of more than three observe intervals between samples invalidates
// suspicion: the stall needs a full idle + confirmation window after it.
func TestSamplingGapResetsSuspicion(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	e.begin("t1", job)
	for i := 0; ; i++ {
		e.step("t1", e.policy.ObserveInterval)
		if o, ok := e.ctrl.Observation("t1"); ok && o.Verdict == catchup.VerdictSuspect {
			break
		}
		if i > 100 {
			t.Fatal("never suspect")
		}
	}
	// Without the gap this sample (past the confirmation window) would
	// have stalled it.
	e.step("t1", 4*e.policy.ObserveInterval)
	if o, _ := e.ctrl.Observation("t1"); o.Verdict != catchup.VerdictHealthy {
		t.Fatalf("after a sampling gap: verdict %s (%s), want healthy", o.Verdict, o.Detail)
	}
	e.wantPhase("t1", catchup.PhaseRunning)
	took := e.stepUntil("t1", catchup.PhaseTerminating, 100, nil)
	if want := e.policy.Idle + e.policy.Confirmation; took != want {
		t.Fatalf("stall declared %s after the gap, want %s", took, want)
	}
}

// Execution ids grow across admissions; only the current execution of an
// open admission may record progress.
func TestExecutionGuards(t *testing.T) {
	e := newEnv(t, nil)
	job := e.running("t1")
	x1 := e.begin("t1", job)
	x2 := e.begin("t1", job)
	if x2.ExecID != x1.ExecID+1 {
		t.Fatalf("execution ids %d then %d", x1.ExecID, x2.ExecID)
	}
	_, err := e.store.RecordProgress(e.ctx, "t1", x1.ExecID, catchup.ProgressBatch)
	wantErr(t, err, catchup.ErrWrongExecution)
	wantErr(t, e.store.CheckAdmission(e.ctx, "t1", x1.ExecID), catchup.ErrWrongExecution)
	if err := e.store.CheckAdmission(e.ctx, "t1", x2.ExecID); err != nil {
		t.Fatal(err)
	}
	seq, err := e.store.RecordProgress(e.ctx, "t1", x2.ExecID, catchup.ProgressCommit)
	if err != nil || seq != 1 {
		t.Fatalf("progress: seq %d, %v", seq, err)
	}
	wantErr(t, e.store.CheckAdmission(e.ctx, "t2", 1), catchup.ErrAdmissionClosed)

	// The Job succeeds; the next admission's executions continue the ids.
	e.runner.Finish(job, catchup.JobSucceeded, "exit 0")
	e.runner.PodsGone(job)
	e.reconcile(e.master, "t1")
	e.wantPhase("t1", catchup.PhaseIdle)
	e.clock.Step(time.Second)
	job2 := e.running("t1")
	x3 := e.begin("t1", job2)
	if x3.ExecID <= x2.ExecID {
		t.Fatalf("execution id %d after %d: ids must grow across admissions", x3.ExecID, x2.ExecID)
	}
	wantErr(t, e.store.CheckAdmission(e.ctx, "t1", x2.ExecID), catchup.ErrWrongExecution)
}
