package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	fakeclock "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
)

const (
	batch  = catchup.ProgressBatch
	commit = catchup.ProgressCommit
)

type rig struct {
	t     *testing.T
	clock *fakeclock.FakeClock
	adm   *fakeAdmission
	sess  *fakeSession
	ex    *Executor
}

func newRig(t *testing.T, slice time.Duration, steps ...step) *rig {
	t.Helper()
	clk := fakeclock.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	adm := &fakeAdmission{jobID: "job-1"}
	ex, err := New(Config{Table: "t", JobID: "job-1", SoftSlice: slice, Clock: clk}, adm)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, clock: clk, adm: adm, ex: ex, sess: &fakeSession{clock: clk, guard: ex.Guard, steps: steps}}
}

func (r *rig) run(sealedThrough uint64) (*Report, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := r.ex.Run(ctx, r.sess, fakeSealed{last: sealedThrough})
	if !r.sess.released {
		r.t.Fatal("the claim was not released")
	}
	return rep, err
}

func wantEvents(t *testing.T, got []catchup.ProgressKind, want ...catchup.ProgressKind) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("progress recorded %v, want %v", got, want)
	}
}

// Progress follows work: an adopted prepared result is not a batch of this
// execution, an already-published plan is not a commit; the executor stops
// at what was sealed at start although more keeps arriving.
func TestCaughtUpProgressOnlyForWork(t *testing.T) {
	r := newRig(t, time.Hour,
		step{reused: true, outcome: publish.OutcomePublished, to: 10},
		step{outcome: publish.OutcomeAlreadyPublished, to: 20},
		step{outcome: publish.OutcomePublished, to: 30},
	)
	rep, err := r.run(30)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeCaughtUp {
		t.Fatalf("outcome %s, want caught_up", rep.Outcome)
	}
	wantEvents(t, r.adm.recorded(), commit, batch, batch, commit)
	if r.sess.prepares != 3 || r.sess.commits != 2 {
		t.Fatalf("%d batches prepared, %d committed; want 3 and 2 (live work past the target is left)", r.sess.prepares, r.sess.commits)
	}
	if rep.ProgressBatches != 2 || rep.ProgressCommits != 2 || rep.Target[0] != 30 || rep.Watermarks[0] != 30 || rep.Rows != 200 {
		t.Fatalf("report %+v", rep)
	}
	if r.adm.checks != 3 {
		t.Fatalf("admission checked %d times, want once per commit attempt (3)", r.adm.checks)
	}
}

// The soft slice stops new batches only: a batch prepared across the end of
// the slice is still committed, then the executor stops.
func TestSoftSliceStopsNewBatchesOnly(t *testing.T) {
	r := newRig(t, 10*time.Minute,
		step{outcome: publish.OutcomePublished, to: 10, prepFor: 4 * time.Minute},
		step{outcome: publish.OutcomePublished, to: 20, prepFor: 7 * time.Minute},
	)
	rep, err := r.run(100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeSliceEnded {
		t.Fatalf("outcome %s, want slice_ended", rep.Outcome)
	}
	if r.sess.prepares != 2 || r.sess.commits != 2 {
		t.Fatalf("%d prepared, %d committed; want 2 and 2 (the second finishes past the slice)", r.sess.prepares, r.sess.commits)
	}
	wantEvents(t, r.adm.recorded(), batch, commit, batch, commit)
}

// Admission closed between a batch and its commit: the guard refuses, the
// round commits nothing, and the executor exits without another batch.
func TestAdmissionClosedMidRunCommitsNothing(t *testing.T) {
	r := newRig(t, time.Hour,
		step{outcome: publish.OutcomePublished, to: 10},
		step{outcome: publish.OutcomePublished, to: 20},
	)
	r.adm.afterRecord = func(kind catchup.ProgressKind, n int) {
		if n == 3 { // the second batch is recorded; the master cancels now
			r.adm.close()
		}
	}
	rep, err := r.run(100)
	if !errors.Is(err, catchup.ErrAdmissionClosed) {
		t.Fatalf("err %v, want ErrAdmissionClosed", err)
	}
	if rep.Outcome != OutcomeAdmissionClosed {
		t.Fatalf("outcome %s", rep.Outcome)
	}
	if r.sess.commits != 1 || r.sess.prepares != 2 {
		t.Fatalf("%d committed, %d prepared; want 1 and 2", r.sess.commits, r.sess.prepares)
	}
	wantEvents(t, r.adm.recorded(), batch, commit, batch)
}

// A Job that is not the admitted one begins nothing and prepares nothing.
func TestWrongExecutionStartsNothing(t *testing.T) {
	r := newRig(t, time.Hour)
	r.adm.jobID = "job-2"
	rep, err := r.run(100)
	if !errors.Is(err, catchup.ErrWrongExecution) || rep.Outcome != OutcomeWrongExecution {
		t.Fatalf("err %v outcome %s, want wrong execution", err, rep.Outcome)
	}
	if r.sess.prepares != 0 {
		t.Fatalf("%d batches prepared by a foreign job", r.sess.prepares)
	}
}

// An unknown progress outcome (etcd outage) is not a reason to stop: the
// next commit checks admission anyway.
func TestProgressOutageContinues(t *testing.T) {
	r := newRig(t, time.Hour, step{outcome: publish.OutcomePublished, to: 10})
	r.adm.failNext = errOutage
	rep, err := r.run(10)
	if err != nil || rep.Outcome != OutcomeCaughtUp {
		t.Fatalf("err %v outcome %s", err, rep.Outcome)
	}
	wantEvents(t, r.adm.recorded(), commit)
	if rep.ProgressBatches != 0 || rep.ProgressCommits != 1 {
		t.Fatalf("report counts %d batches, %d commits", rep.ProgressBatches, rep.ProgressCommits)
	}
}

// Nothing sealed: caught up at once, no fence, no batch, no progress.
func TestNothingSealedIsCaughtUp(t *testing.T) {
	r := newRig(t, time.Hour)
	rep, err := r.run(0)
	if err != nil || rep.Outcome != OutcomeCaughtUp || r.sess.prepares != 0 {
		t.Fatalf("err %v outcome %s prepares %d", err, rep.Outcome, r.sess.prepares)
	}
	wantEvents(t, r.adm.recorded())
}

func TestGuardRefusesBeforeExecution(t *testing.T) {
	r := newRig(t, time.Hour)
	if err := r.ex.Guard(context.Background(), "t"); !errors.Is(err, catchup.ErrAdmissionClosed) {
		t.Fatalf("guard before BeginExecution: %v", err)
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{nil, OutcomeCaughtUp},
		{fmt.Errorf("x: %w", catchup.ErrAdmissionClosed), OutcomeAdmissionClosed},
		{fmt.Errorf("x: %w", catchup.ErrWrongExecution), OutcomeWrongExecution},
		{fmt.Errorf("x: %w", publish.ErrFenced), OutcomeFenced},
		{fmt.Errorf("x: %w", coord.ErrReserved), OutcomeWrongExecution},
		{fmt.Errorf("x: %w", coord.ErrNotReserved), OutcomeAdmissionClosed},
		{fmt.Errorf("x: %w", coord.ErrClaimed), OutcomeFailed},
		{fmt.Errorf("x: %w", coord.ErrLeaseExpired), OutcomeFenced},
		{errOutage, OutcomeFailed},
		{fmt.Errorf("x: %w", context.Canceled), OutcomeInterrupted},
	} {
		if got := Classify(c.err, OutcomeCaughtUp); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{Table: "../x", JobID: "j"}, &fakeAdmission{}); err == nil {
		t.Fatal("bad table accepted")
	}
	if _, err := New(Config{Table: "t"}, &fakeAdmission{}); err == nil {
		t.Fatal("missing job id accepted")
	}
}
