package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	fakeclock "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
)

// fakeAdmission is an in-memory admission record of one table.
type fakeAdmission struct {
	mu       sync.Mutex
	jobID    string
	closed   bool
	exec     uint64
	events   []catchup.ProgressKind
	checks   int
	failNext error // returned once by RecordProgress
	// afterRecord runs after a progress event was recorded (the master's
	// cancellation landing right after it).
	afterRecord func(kind catchup.ProgressKind, n int)
}

func (a *fakeAdmission) BeginExecution(_ context.Context, table, jobID string) (catchup.Execution, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return catchup.Execution{}, catchup.ErrAdmissionClosed
	}
	if jobID != a.jobID {
		return catchup.Execution{}, fmt.Errorf("admitted for %s: %w", a.jobID, catchup.ErrWrongExecution)
	}
	a.exec++
	return catchup.Execution{Table: table, JobID: jobID, ExecID: a.exec}, nil
}

func (a *fakeAdmission) check(execID uint64) error {
	if a.closed {
		return catchup.ErrAdmissionClosed
	}
	if execID != a.exec {
		return catchup.ErrWrongExecution
	}
	return nil
}

func (a *fakeAdmission) CheckAdmission(_ context.Context, _ string, execID uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks++
	return a.check(execID)
}

func (a *fakeAdmission) RecordProgress(_ context.Context, _ string, execID uint64, kind catchup.ProgressKind) (uint64, error) {
	a.mu.Lock()
	if err := a.failNext; err != nil {
		a.failNext = nil
		a.mu.Unlock()
		return 0, err
	}
	if err := a.check(execID); err != nil {
		a.mu.Unlock()
		return 0, err
	}
	a.events = append(a.events, kind)
	n, hook := len(a.events), a.afterRecord
	a.mu.Unlock()
	if hook != nil {
		hook(kind, n)
	}
	return uint64(n), nil
}

func (a *fakeAdmission) Heartbeat(context.Context, string, uint64) error { return nil }

func (a *fakeAdmission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
}

func (a *fakeAdmission) recorded() []catchup.ProgressKind {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]catchup.ProgressKind(nil), a.events...)
}

// step is one scripted batch of the fake session.
type step struct {
	reused  bool            // Prepare adopted a prepared result
	outcome publish.Outcome // what Round reports once past the guard
	to      uint64          // shard 0's watermark after the round
	prepFor time.Duration   // clock time the preparation takes
}

// fakeSession plays steps in order; each Round runs the executor's guard
// first, exactly where the publisher runs its CommitGuard. After the
// script it has more (live) work forever.
type fakeSession struct {
	clock    *fakeclock.FakeClock
	guard    func(context.Context, string) error
	steps    []step
	wm       uint64
	prepares int
	rounds   int
	commits  int
	released bool
}

func (s *fakeSession) cur() step {
	if s.prepares-1 < len(s.steps) {
		return s.steps[s.prepares-1]
	}
	return step{outcome: publish.OutcomePublished, to: s.wm + 10}
}

func (s *fakeSession) Prepare(context.Context) (*publish.Result, error) {
	s.prepares++
	st := s.cur()
	s.clock.Step(st.prepFor)
	return &publish.Result{Outcome: publish.OutcomePrepared, Plan: fmt.Sprint("plan-", s.prepares), Reused: st.reused,
		Adopted: st.reused, Watermarks: publish.Watermarks{0: s.wm}}, nil
}

func (s *fakeSession) Round(ctx context.Context) (*publish.Result, error) {
	s.rounds++
	st := s.cur()
	res := &publish.Result{Plan: fmt.Sprint("plan-", s.prepares), Reused: true, Watermarks: publish.Watermarks{0: s.wm}}
	if err := s.guard(ctx, "t"); err != nil {
		return res, err
	}
	if st.outcome == publish.OutcomePublished {
		s.commits++
		res.Rows, res.Bytes, res.Version = 100, 1000, uint64(s.commits+1)
	}
	s.wm = st.to
	res.Outcome, res.Watermarks = st.outcome, publish.Watermarks{0: s.wm}
	return res, nil
}

func (s *fakeSession) Release(context.Context) error { s.released = true; return nil }
func (s *fakeSession) Epoch() uint64                 { return 7 }

// fakeSealed says shard 0 has sealed entries through last.
type fakeSealed struct{ last uint64 }

func (f fakeSealed) Stats(context.Context, string, map[int]uint64) (wal.TableStats, error) {
	return wal.TableStats{Table: "t", Shards: []wal.ShardStats{{Shard: 0}}}, nil
}

func (f fakeSealed) Generations(context.Context, string, int) ([]wal.Generation, error) {
	return []wal.Generation{
		{ID: 1, First: 1, Last: f.last, Entries: int(f.last), Sealed: true},
		{ID: 2, First: f.last + 1, Last: f.last + 5, Entries: 5}, // open: not a target
	}, nil
}

var errOutage = fmt.Errorf("etcd did not answer: %w", errs.ErrUnavailable)
