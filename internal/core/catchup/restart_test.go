package catchup_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// A master that dies after an ambiguous create (the Job exists, the
// record says "starting") is replaced by one that reconciles the same Job
// under the same deterministic name; a restart while running creates
// nothing.
func TestMasterRestartMidReservationReconcilesSameJob(t *testing.T) {
	e := newEnv(t, nil)
	e.scan("t1", 1000)
	a := e.admit(e.master, "t1")
	e.wantDecision(a, catchup.DecisionReserved)
	e.runner.FailNext("create-after", fmt.Errorf("create: timeout after send: %w", errs.ErrUnavailable))
	if _, err := e.ctrl.ReconcileForTest(e.ctx, "t1"); err == nil {
		t.Fatal("ambiguous create not reported")
	}
	e.wantPhase("t1", catchup.PhaseStarting)

	second := e.startMaster(e.policy)
	e.reconcile(second, "t1")
	st := e.wantPhase("t1", catchup.PhaseRunning)
	if e.runner.Created() != 1 || *st.JobID != *a.JobID || *st.JobUID != "uid-1" {
		t.Fatalf("after restart: %d jobs, status %+v", e.runner.Created(), st)
	}
	third := e.startMaster(e.policy)
	creates := e.runner.CountCalls("create ")
	e.reconcile(third, "t1")
	e.reconcile(e.master, "t1")
	if e.runner.CountCalls("create ") != creates || e.runner.Created() != 1 {
		t.Fatalf("a running job was created again: %v", e.runner.Calls())
	}
	if want := catchup.JobName(e.prefix, "t1", 1); *a.JobID != want {
		t.Fatalf("job id %s, want %s", *a.JobID, want)
	}
}

// Failures back off 120 s, 240 s, 480 s … and flag attention after three;
// a repeat request during an attempt coalesces and keeps the budget; a
// success clears it and needs newer statistics before readmission.
func TestFailureBudgetBackoffAndSuccess(t *testing.T) {
	e := newEnv(t, nil)
	for i := 1; i <= 3; i++ {
		e.scan("t1", 1000)
		a := e.admit(e.master, "t1")
		e.wantDecision(a, catchup.DecisionReserved)
		if *a.Attempt != i {
			t.Fatalf("attempt %d, want %d", *a.Attempt, i)
		}
		e.reconcile(e.master, "t1")
		rep := e.admit(e.master, "t1")
		e.wantDecision(rep, catchup.DecisionAlreadyActive)
		if *rep.JobID != *a.JobID || e.status("t1").ConsecutiveFailures != i-1 {
			t.Fatalf("repeat: %+v, failures %d", rep, e.status("t1").ConsecutiveFailures)
		}
		e.runner.Finish(*a.JobID, catchup.JobFailed, "exit 5")
		e.reconcile(e.master, "t1")
		e.wantPhase("t1", catchup.PhaseFinishing) // Pods still running: slot held
		e.runner.PodsGone(*a.JobID)
		e.reconcile(e.master, "t1")
		st := e.wantPhase("t1", catchup.PhaseIdle)
		wait := 120 * time.Second << (i - 1)
		if st.ConsecutiveFailures != i || !st.NextRetry.Equal(e.clock.Now().Add(wait)) || st.NeedsAttention != (i >= 3) {
			t.Fatalf("after failure %d: failures %d, next retry %v (want +%s), attention %v", i,
				st.ConsecutiveFailures, st.NextRetry, wait, st.NeedsAttention)
		}
		e.scan("t1", 1000)
		e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionCoolingDown)
		e.clock.Step(wait)
	}
	e.scan("t1", 1000)
	a := e.admit(e.master, "t1")
	e.wantDecision(a, catchup.DecisionReserved)
	e.reconcile(e.master, "t1")
	e.runner.Finish(*a.JobID, catchup.JobSucceeded, "")
	e.runner.PodsGone(*a.JobID)
	e.reconcile(e.master, "t1")
	st := e.wantPhase("t1", catchup.PhaseIdle)
	if *st.Outcome != catchup.OutcomeSuccess || st.ConsecutiveFailures != 0 || st.NeedsAttention || st.NextRetry != nil {
		t.Fatalf("after success: %+v", st)
	}
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionStaleStats)
	e.clock.Step(time.Second)
	e.scan("t1", 1000)
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionReserved)
	if len(e.runner.Jobs()) != 4 {
		t.Fatalf("jobs %v, want one per attempt", e.runner.Jobs())
	}
}

// Records of an unknown kind or a newer schema version fail closed:
// nothing is admitted, reconciled or reported from them.
func TestUnknownRecordsFailClosed(t *testing.T) {
	e := newEnv(t, nil)
	put := func(key string, v map[string]any) {
		b, _ := json.Marshal(v)
		if _, err := e.c.Etcd().Put(e.ctx, e.prefix+key, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	e.scan("t1", 1000)
	put("/catchup/targets/t1", map[string]any{"kind": catchup.KindTarget, "schema_version": 2, "table": "t1", "phase": "running"})
	_, err := e.m.Admit(e.ctx, catchup.Request{Target: "t1"})
	wantErr(t, err, coord.ErrUnknownRecord)
	_, err = e.store.Status(e.ctx, "t1")
	wantErr(t, err, coord.ErrUnknownRecord)
	_, err = e.ctrl.ReconcileForTest(e.ctx, "t1")
	wantErr(t, err, coord.ErrUnknownRecord)
	if e.countKeys("/reservations/") != 0 || e.countKeys("/catchup/slots/") != 0 {
		t.Fatal("something was reserved from an unknown record")
	}

	put("/catchup/admission/t2", map[string]any{"kind": "catchup-admission-v9", "schema_version": 1, "open": true})
	wantErr(t, e.store.CheckAdmission(e.ctx, "t2", 0), coord.ErrUnknownRecord)

	e.scan("t3", 1000)
	put("/catchup/slots/3", map[string]any{"kind": "gpu-slot", "schema_version": 1})
	_, err = e.m.Admit(e.ctx, catchup.Request{Target: "t3"})
	wantErr(t, err, coord.ErrUnknownRecord)

	put("/catchup/policy", map[string]any{"kind": catchup.KindPolicy, "schema_version": 7})
	_, err = e.tryMaster(e.policy)
	wantErr(t, err, coord.ErrUnknownRecord)
	// This master's admission notices the policy record changed.
	_, err = e.m.Admit(e.ctx, catchup.Request{Target: "t4"})
	if err == nil {
		t.Fatal("admission under a replaced policy record")
	}
}
