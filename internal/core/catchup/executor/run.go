package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
)

// Run executes on s, a session already holding the table's claim with this
// Job's identity (publish.Publisher.Acquire with coord.OwnerCatchup), and
// releases it before returning. It begins an execution, reads what is
// sealed now (the target) and merges batch after batch until an outcome
// (see Outcome). The report is always returned; err is nil for
// OutcomeCaughtUp and OutcomeSliceEnded and otherwise the cause, wrapping
// catchup.ErrAdmissionClosed, catchup.ErrWrongExecution, errs.ErrFenced or
// the failure's own category.
//
// Cancellation stops at the next step: a prepared batch stays pinned for
// the next owner, and a commit in flight is resolved by the next round
// (rule 6). Progress is recorded only after a batch this execution wrote
// and after a commit this execution made (rule 15); a progress record
// whose outcome is unknown (etcd unavailable) is logged and the executor
// goes on, because the next commit checks admission anyway.
func (e *Executor) Run(ctx context.Context, s Session, src Sealed) (*Report, error) {
	rep := &Report{Table: e.cfg.Table, JobID: e.cfg.JobID, Epoch: s.Epoch(), Batches: []Batch{},
		Target: publish.Watermarks{}, Watermarks: publish.Watermarks{}}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), coord.DefaultCallTimeout)
		defer cancel()
		if err := s.Release(rctx); err != nil {
			e.log.Warn("release catch-up claim", "err", err)
		}
	}()
	err := e.run(ctx, s, src, rep)
	rep.Outcome = Classify(err, rep.Outcome)
	if err != nil {
		rep.Error = err.Error()
	}
	if e.cfg.Cache != nil {
		st := e.cfg.Cache.Stats()
		rep.Cache = &st
	}
	e.log.Info("catch-up execution ended", "outcome", rep.Outcome, "exec", rep.ExecID, "batches", len(rep.Batches),
		"rows", rep.Rows, "bytes", rep.Bytes, "cache", rep.Cache, "err", err)
	return rep, err
}

func (e *Executor) run(ctx context.Context, s Session, src Sealed, rep *Report) error {
	start := e.cfg.Clock.Now()
	x, err := e.adm.BeginExecution(ctx, e.cfg.Table, e.cfg.JobID)
	if err != nil {
		return err
	}
	e.execID.Store(x.ExecID)
	rep.ExecID = x.ExecID
	e.log.Info("catch-up execution begun", "exec", x.ExecID, "epoch", s.Epoch(), "soft_slice", e.cfg.SoftSlice)

	hbCtx, stopHB := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.heartbeats(hbCtx, x.ExecID) }()
	defer func() { stopHB(); wg.Wait() }()

	if rep.Target, err = sealedTarget(ctx, src, e.cfg.Table); err != nil {
		return err
	}
	for {
		if e.cfg.Clock.Since(start) >= e.cfg.SoftSlice {
			rep.Outcome = OutcomeSliceEnded
			return nil
		}
		if reached(rep.Watermarks, rep.Target) {
			rep.Outcome = OutcomeCaughtUp
			return nil
		}
		prep, err := s.Prepare(ctx)
		if err != nil {
			return err
		}
		rep.Watermarks = prep.Watermarks.Clone()
		if prep.Outcome == publish.OutcomeIdle {
			rep.Outcome = OutcomeCaughtUp
			return nil
		}
		if !prep.Reused {
			ok, err := e.progress(ctx, x.ExecID, catchup.ProgressBatch)
			if err != nil {
				return err
			}
			if ok {
				rep.ProgressBatches++
			}
		}
		// Admitted work finishes even past the soft slice: no slice check
		// between a batch and its commit.
		res, err := s.Round(ctx)
		if err != nil {
			return err
		}
		rep.Watermarks = res.Watermarks.Clone()
		b := Batch{Plan: res.Plan, Adopted: prep.Adopted, Reused: prep.Reused, Outcome: res.Outcome,
			Rows: res.Rows, Bytes: res.Bytes, Version: res.Version, Watermark: rep.Watermarks}
		rep.Batches = append(rep.Batches, b)
		if res.Outcome == publish.OutcomePublished {
			rep.Rows, rep.Bytes = rep.Rows+res.Rows, rep.Bytes+res.Bytes
			ok, err := e.progress(ctx, x.ExecID, catchup.ProgressCommit)
			if err != nil {
				return err
			}
			if ok {
				rep.ProgressCommits++
			}
		}
		if e.cfg.OnBatch != nil {
			e.cfg.OnBatch(b)
		}
	}
}

// progress records one event and reports whether it is known to be
// recorded; only a closed or foreign admission (or cancellation) stops the
// executor — an unknown outcome may or may not have counted it.
func (e *Executor) progress(ctx context.Context, execID uint64, kind catchup.ProgressKind) (bool, error) {
	seq, err := e.adm.RecordProgress(ctx, e.cfg.Table, execID, kind)
	switch {
	case err == nil:
		e.log.Debug("catch-up progress recorded", "kind", kind, "seq", seq)
		return true, nil
	case errors.Is(err, catchup.ErrAdmissionClosed), errors.Is(err, catchup.ErrWrongExecution), ctx.Err() != nil:
		return false, err
	}
	e.log.Warn("catch-up progress not recorded; continuing", "kind", kind, "err", err)
	return false, nil
}

// heartbeats records status-only heartbeats until ctx ends.
func (e *Executor) heartbeats(ctx context.Context, execID uint64) {
	for {
		t := e.cfg.Clock.NewTimer(e.cfg.HeartbeatInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			if err := e.adm.Heartbeat(ctx, e.cfg.Table, execID); err != nil && ctx.Err() == nil {
				e.log.Debug("catch-up heartbeat", "err", err)
			}
		}
	}
}

// sealedTarget returns, per shard with sealed entries, the last position
// of its newest sealed generation now.
func sealedTarget(ctx context.Context, src Sealed, table string) (publish.Watermarks, error) {
	st, err := src.Stats(ctx, table, nil)
	if err != nil {
		return nil, fmt.Errorf("read what is sealed in table %s: %w", table, err)
	}
	out := publish.Watermarks{}
	for _, sh := range st.Shards {
		gens, err := src.Generations(ctx, table, sh.Shard)
		if err != nil {
			return nil, fmt.Errorf("read generations of table %s shard %d: %w", table, sh.Shard, err)
		}
		for _, g := range gens {
			if g.Sealed && g.Entries > 0 && g.Last > out[sh.Shard] {
				out[sh.Shard] = g.Last
			}
		}
	}
	return out, nil
}

// reached reports whether every target position is published.
func reached(wm, target publish.Watermarks) bool {
	for shard, pos := range target {
		if wm[shard] < pos {
			return false
		}
	}
	return true
}

// Classify maps an error of the executor (or of claiming the table before
// it) onto an Outcome; ok is returned for a nil error.
func Classify(err error, ok Outcome) Outcome {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, catchup.ErrWrongExecution), errors.Is(err, coord.ErrReserved):
		// ErrReserved for a catch-up owner: reserved for another Job.
		return OutcomeWrongExecution
	case errors.Is(err, catchup.ErrAdmissionClosed), errors.Is(err, coord.ErrNotReserved):
		// ErrNotReserved: the reservation is gone (released or cancelled).
		return OutcomeAdmissionClosed
	case errors.Is(err, context.Canceled):
		return OutcomeInterrupted
	case errors.Is(err, errs.ErrFenced):
		return OutcomeFenced
	}
	return OutcomeFailed
}
