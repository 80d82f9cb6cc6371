package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
)

// tableLoop is the life of one table in a worker: look, claim, hold,
// release, again, until shutdown. It is run by one goroutine.
type tableLoop struct {
	w     *Worker
	table string
	log   *slog.Logger

	transient backoff // transient errors, from PollInterval to ErrorBackoff
	severe    backoff // data-integrity errors, from CorruptBackoff to MaxCorruptBackoff
	// seen holds the table's watermarks as last seen by this worker (a
	// round's result, or a read of its latest version); nil at first and
	// after a severe error.
	seen publish.Watermarks
	// stopped is set when the table's storage failed (kindStorage): the
	// loop ends, the table is not published again by this process.
	stopped bool
}

func (t *tableLoop) run(ctx context.Context) {
	var delay time.Duration
	for !t.stopped && t.w.sleep(ctx, delay, nil) {
		delay = t.look(ctx)
	}
}

// stop ends the table's loop after a storage failure, saying why.
func (t *tableLoop) stop(err error) time.Duration {
	t.stopped = true
	t.log.Error("storage failed: this worker stops publishing the table until it is restarted", "kind", kindStorage, "err", err)
	return 0
}

// look takes one look at the table and claims and holds it if there is
// work and nobody else has it. It returns how long to wait before the next
// look.
func (t *tableLoop) look(ctx context.Context) time.Duration {
	poll := t.w.cfg.PollInterval
	if busy, _, err := t.w.co.Busy(ctx, t.table); err != nil {
		return t.failed(ctx, "busy probe", err)
	} else if busy {
		return poll
	}
	if work, err := t.hasWork(ctx); err != nil {
		return t.failed(ctx, "pending work probe", err)
	} else if !work {
		return poll
	}
	if err := t.w.tables.Acquire(ctx, 1); err != nil {
		return 0 // shutdown
	}
	defer t.w.tables.Release(1)
	if ctx.Err() != nil {
		return 0
	}
	s, err := t.w.pub.Acquire(ctx, t.table)
	if busy(err) {
		return poll
	}
	if err != nil {
		return t.failed(ctx, "acquire", err)
	}
	t.w.m.acquired(t.table)
	t.log.Info("claim acquired", "epoch", s.Epoch(), "claim_revision", s.Claim().CreateRevision(), "lease_ttl", s.Claim().TTL())
	return t.hold(ctx, s)
}

// hold runs rounds on a held claim until it has to be given up, releases
// it, and returns the wait before the next look.
func (t *tableLoop) hold(ctx context.Context, s *publish.Session) (delay time.Duration) {
	clk, poll, claim := t.w.cfg.Clock, t.w.cfg.PollInterval, s.Claim()
	log := t.log.With("epoch", s.Epoch())
	acquiredAt := clk.Now()
	why := "shutdown"
	defer func() { t.release(ctx, s, log, why) }()

	idleRounds := 0
	var idleSince time.Time
	for {
		switch {
		case ctx.Err() != nil:
			return 0
		case claim.Err() != nil:
			why = "lost"
			return t.w.cfg.LostBackoff
		case s.SliceOver() || t.w.policy.sliceOver(s.Rounds(), clk.Since(acquiredAt)):
			why = "slice over"
			return poll
		case t.w.policy.idleOver(idleRounds, clk.Since(idleSince)):
			why = "idle"
			return poll
		}
		res, err := t.round(ctx, s, log)
		if errors.Is(err, errNoRoundSlot) {
			continue // shutdown or claim loss while waiting: see above
		}
		if err != nil {
			k := classify(err, claim.Err(), t.w.roundBase.Err() != nil)
			switch {
			case k == kindStorage:
				why = "storage failed"
				return t.stop(err)
			case k == kindFenced:
				why = "fenced"
				return t.w.cfg.LostBackoff
			case k == kindStopped:
				why = "stopped by a storage failure"
				return t.transient.next()
			case k == kindShutdown:
				return 0
			case k == kindWALUnavailable:
				why = "WAL unreachable"
				return t.transient.next()
			case k.severe():
				why = string(k)
				t.seen = nil // look again after the backoff, whatever the WAL says
				d := t.severe.next()
				log.Error("releasing the table; it is looked at again after the backoff", "kind", k, "backoff", d)
				return d
			}
			t.w.sleep(ctx, t.transient.next(), claim.Done())
			continue
		}
		t.transient.reset()
		t.severe.reset()
		t.seen = res.Watermarks
		if res.Outcome != publish.OutcomeIdle {
			idleRounds = 0
			continue // more work may be pending: no wait
		}
		if idleRounds == 0 {
			idleSince = clk.Now()
		}
		idleRounds++
		if t.w.policy.idleOver(idleRounds, clk.Since(idleSince)) {
			continue // release without a pointless wait
		}
		t.w.sleep(ctx, poll, claim.Done())
	}
}

// errNoRoundSlot: no round was run because shutdown began or the claim
// was lost while waiting for a round slot.
var errNoRoundSlot = errors.New("no round slot")

// round runs one publication round within a global round slot. The round's
// context is the claim's, derived from the worker's round base: shutdown
// does not cancel it (until the grace is over), losing the claim does.
func (t *tableLoop) round(ctx context.Context, s *publish.Session, log *slog.Logger) (*publish.Result, error) {
	claim := s.Claim()
	wctx, cancelWait := claim.Context(ctx)
	err := t.w.rounds.Acquire(wctx, 1)
	cancelWait()
	if err != nil {
		return nil, errNoRoundSlot
	}
	defer t.w.rounds.Release(1)
	if ctx.Err() != nil || claim.Err() != nil {
		return nil, errNoRoundSlot
	}
	rctx, cancel := claim.Context(t.w.roundBase)
	defer cancel()
	start := t.w.cfg.Clock.Now()
	res, err := s.Round(rctx)
	took := t.w.cfg.Clock.Since(start)
	t.w.m.round(t.table, res, err)
	if cerr := claim.Err(); err != nil && cerr != nil && !errors.Is(err, errs.ErrFenced) {
		// The round stopped because its claim ended (its context was the
		// claim's): what it met on the way out, often a bare "context
		// canceled", is not the reason. Keep the claim's, with its sentinel.
		err = fmt.Errorf("%w (the round stopped at: %v)", cerr, err)
	}
	if err != nil {
		k := classify(err, claim.Err(), t.w.roundBase.Err() != nil)
		t.w.m.failure(t.table, k)
		attrs := []any{"kind", k, "duration", took, "err", err}
		if res != nil && res.Plan != "" {
			attrs = append(attrs, "plan", res.Plan)
		}
		if cerr := claim.Err(); cerr != nil {
			attrs = append(attrs, "claim_err", cerr)
		}
		switch {
		case k.severe(), k == kindStorage:
			log.Error("round failed on a data-integrity or configuration error", attrs...)
		case k == kindStopped:
			log.Error("the table is stopped for the fleet by a storage failure; releasing it until an operator resumes it (walctl table stopped, walctl table resume)", attrs...)
		case k == kindFenced:
			log.Warn(t.fencedBy(s.Epoch())+"; no further rounds under this claim", attrs...)
		case k == kindWALUnavailable:
			log.Warn("round could not reach the WAL; releasing the claim", attrs...)
		case k == kindShutdown:
			log.Warn("round cancelled by shutdown after the grace; the next owner resolves it", attrs...)
		default:
			log.Warn("round failed; retrying with backoff under the same claim", attrs...)
		}
		return res, err
	}
	if res.Outcome == publish.OutcomeIdle {
		t.w.m.lag(t.table, 0, 0)
		log.Debug("round", "outcome", res.Outcome, "duration", took)
		return res, nil
	}
	log.Info("round", "outcome", res.Outcome, "plan", res.Plan, "adopted", res.Adopted, "reused", res.Reused,
		"rows", res.Rows, "bytes", res.Bytes, "files", len(res.Files), "version", res.Version, "duration", took)
	if p, err := t.pending(rctx, res.Watermarks); err == nil {
		t.w.m.lag(t.table, p.bytes, p.gens)
	}
	return res, nil
}

// hasWork reports whether the WAL holds sealed work above the table's
// watermarks. It uses the watermarks this worker saw last and reads the
// table's latest Lance version (no claim needed, DESIGN.md §3 rule 13) on
// the first look, after a severe error, and when another holder has
// published and trimmed past them. A table that has no dataset yet starts
// at zero watermarks. A watermark behind the WAL's trimmed position counts
// as work: the round then reports it as the data-integrity error it is.
func (t *tableLoop) hasWork(ctx context.Context) (bool, error) {
	if t.seen != nil {
		p, err := t.pending(ctx, t.seen)
		if err != nil || !p.behindTrim {
			return p.gens > 0, err
		}
	}
	w, err := t.w.pub.LatestWatermarks(t.table)
	if err != nil {
		return false, err
	}
	t.seen = w
	p, err := t.pending(ctx, w)
	return p.gens > 0 || p.behindTrim, err
}

type pending struct {
	bytes      int64
	gens       int
	behindTrim bool
}

// pending asks the WAL for the sealed work above watermarks: one Stats call.
func (t *tableLoop) pending(ctx context.Context, watermarks publish.Watermarks) (pending, error) {
	var p pending
	st, err := t.w.cfg.Log.Stats(ctx, t.table, watermarks)
	if err != nil {
		return p, err
	}
	for _, sh := range st.Shards {
		p.bytes += sh.PendingBytes
		p.gens += sh.PendingGenerations
		p.behindTrim = p.behindTrim || sh.WatermarkBehindTrim
	}
	return p, nil
}

// failed logs and counts an error met outside a round (busy probe, pending
// probe, acquire) and returns the wait before the next look.
func (t *tableLoop) failed(ctx context.Context, op string, err error) time.Duration {
	if ctx.Err() != nil {
		return 0 // shutdown: not an error
	}
	k := classify(err, nil, false)
	t.w.m.failure(t.table, k)
	switch {
	case k == kindStorage:
		return t.stop(err)
	case k.severe():
		d := t.severe.next()
		t.log.Error(op+" failed; backing off", "kind", k, "err", err, "backoff", d)
		return d
	case k == kindFenced:
		t.log.Warn(op+" fenced out", "err", err, "backoff", t.w.cfg.LostBackoff)
		return t.w.cfg.LostBackoff
	}
	d := t.transient.next()
	t.log.Warn(op+" failed; backing off", "kind", k, "err", err, "backoff", d)
	return d
}

// release gives the claim up (revoking its lease) with a fresh deadline:
// it runs at shutdown too, when ctx is already done.
func (t *tableLoop) release(ctx context.Context, s *publish.Session, log *slog.Logger, why string) {
	cerr := s.Claim().Err()
	lost := cerr != nil && !errors.Is(cerr, coord.ErrReleased)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.w.cfg.ReleaseTimeout)
	defer cancel()
	err := s.Release(rctx)
	t.w.m.ended(t.table, lost)
	if lost {
		log.Warn("claim lost; stopped publishing the table", "reason", cerr, "rounds", s.Rounds())
	} else {
		log.Info("claim released", "reason", why, "rounds", s.Rounds())
	}
	if err != nil {
		t.w.releaseFailures.Add(1)
		t.w.m.failure(t.table, classify(err, nil, false))
		log.Warn("claim release failed; its lease expires within its TTL", "err", err)
	}
}

// fencedBy says who fenced this holder out: the table's current publisher
// epoch E read from the WAL against the holder's own M ("fenced by epoch E
// (mine M)"), or, when nobody has advanced past M yet, that the claim was
// lost at M.
func (t *tableLoop) fencedBy(mine uint64) string {
	ctx, cancel := context.WithTimeout(t.w.roundBase, t.w.cfg.ReleaseTimeout)
	defer cancel()
	e, err := t.w.cfg.Log.Epoch(ctx, t.table)
	switch {
	case err != nil:
		return fmt.Sprintf("fenced out at epoch %d (the current epoch could not be read: %v)", mine, err)
	case e > mine:
		return fmt.Sprintf("fenced by epoch %d (mine %d)", e, mine)
	}
	return fmt.Sprintf("claim lost at epoch %d (no newer epoch yet)", mine)
}
