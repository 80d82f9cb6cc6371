package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
)

var (
	errAlreadyPublished = errors.New("plan already published")
	errSuperseded       = errors.New("plan superseded")
	// ErrFilesDamaged is returned when a prepared file fails verification
	// immediately before a commit; the attempt is retired and the next round
	// prepares anew.
	ErrFilesDamaged = fmt.Errorf("prepared files failed verification: %w", errs.ErrCorrupt)
)

// publish commits a prepared plan against the exact parent (rules 4–7),
// resolves an ambiguous outcome by looking for the plan id in the table's
// versions (rule 6), confirms the version durable and trims the WAL up to
// the durable watermarks (rule 9).
func (s *Session) publish(ctx context.Context, res *Result, plan *Plan, prep *Prepared, parent *lance.Manifest) (*Result, error) {
	files := prep.Descriptors()
	for attempt := 0; ; attempt++ {
		if attempt == s.p.cfg.CommitAttempts {
			return res, fmt.Errorf("commit %s: still contended after %d attempts: %w", plan.ID, attempt, errs.ErrConflict)
		}
		if err := s.beforeCommit(ctx, plan, prep); err != nil {
			return res, err
		}
		end, err := commitWatermarks(plan, parent)
		if err != nil {
			return res, err
		}
		cr, err := s.ds.Commit(ctx, lance.CommitRequest{
			ParentVersion: parent.Version,
			Kind:          lance.Append,
			Files:         files,
			ConfigSet:     s.committer().delta(publishDelta(end, plan.ID)),
			TxnID:         newID(),
			Now:           s.p.cfg.Clock.Now,
			Check:         s.commitCheck(plan),
		})
		if err == nil {
			return s.finish(ctx, res, plan, OutcomePublished, cr.Version)
		}
		next, out, err := s.commitFailed(ctx, res, plan, parent, err)
		if next == nil {
			return out, err
		}
		parent = next
	}
}

// beforeCommit runs the checks every commit attempt repeats: rule 7 (the
// prepared files, immediately before the attempt; a damaged attempt is
// retired), the early WAL-epoch abort, the caller's guard, and the claim
// with the table's storage stop.
func (s *Session) beforeCommit(ctx context.Context, plan *Plan, prep *Prepared) error {
	if err := s.verify(prep); err != nil {
		_ = s.store.RetireAttempt(ctx, prep, s.guard)
		return fmt.Errorf("plan %s attempt %s: %v: %w", plan.ID, prep.Attempt, err, ErrFilesDamaged)
	}
	// Early abort: the WAL already knows a newer publisher.
	we, err := s.p.log.Epoch(ctx, s.table)
	if err != nil {
		return err
	}
	if we != s.epoch {
		return fmt.Errorf("WAL publisher epoch of %s is %d, this publisher has %d: %w", s.table, we, s.epoch, ErrFenced)
	}
	if err := failpoint.Inject(ctx, failpoint.AfterWALEpochCheck, 0); err != nil {
		return err
	}
	if err := s.commitGuard(ctx); err != nil {
		return err
	}
	// The claim, read linearizably with the table's fleet-wide storage
	// stop: no commit after another process's fsync failed (rule 24).
	return s.claim.Valid(ctx)
}

// commitWatermarks are the parent's watermarks advanced by the plan's
// ranges; a range that would move a watermark back is refused (rule 6).
func commitWatermarks(plan *Plan, parent *lance.Manifest) (Watermarks, error) {
	ps, err := ParseState(parent.Config)
	if err != nil {
		return nil, err
	}
	end := ps.Watermarks.Clone()
	for _, r := range plan.Ranges {
		if r.To < ps.Watermarks[r.Shard] { // rule 6: never backwards
			return nil, fmt.Errorf("plan %s would move shard %d's watermark back from %d to %d: %w", plan.ID, r.Shard, ps.Watermarks[r.Shard], r.To, errs.ErrCorrupt)
		}
		end[r.Shard] = r.To
	}
	return end, nil
}

// commitFailed decides what a failed commit attempt on parent means. It
// returns the new parent to retry on (a lost race), or nil and the round's
// result and error when the round is over: already published, superseded,
// resolved by the plan id recorded in the table, fenced, or failed.
func (s *Session) commitFailed(ctx context.Context, res *Result, plan *Plan, parent *lance.Manifest, err error) (*lance.Manifest, *Result, error) {
	switch {
	case errors.Is(err, errAlreadyPublished):
		out, ferr := s.finish(ctx, res, plan, OutcomeAlreadyPublished, 0)
		return nil, out, ferr
	case errors.Is(err, durable.ErrSyncFailed):
		// The manifest may be linked but a failed fsync covered it: a
		// later sync that succeeds proves nothing, so the plan id is not
		// looked up and nothing is trimmed (the table stops, see Round).
		return nil, res, fmt.Errorf("commit plan %s on version %d: %w", plan.ID, parent.Version, err)
	case errors.Is(err, errSuperseded):
		if rerr := s.store.RetirePlan(ctx, plan, s.guard); rerr != nil {
			return nil, res, rerr
		}
		res.Outcome = OutcomeSuperseded
		return nil, res, nil
	case errors.Is(err, lance.ErrCommitConflict), errors.Is(err, lance.ErrCommitUnknown):
		// Lost the race, or do not know whether the write happened: look
		// for the plan id, never commit again blindly (rule 6).
		v, by, found, ferr := s.findPlan(plan.ID, parent.Version)
		if ferr != nil {
			return nil, res, ferr
		}
		if found && by != s.epoch {
			// A successor adopted the plan and published it (a data
			// commit carries its committer's epoch): this attempt's
			// write lost to its fence, and this publisher is fenced out.
			return nil, res, fmt.Errorf("plan %s was published in version %d at epoch %d, this publisher has %d: %w", plan.ID, v, by, s.epoch, ErrFenced)
		}
		if found {
			s.log.Info("commit resolved by the plan id recorded in the table", "plan", plan.ID, "version", v, "cause", err)
			out, ferr := s.finish(ctx, res, plan, OutcomePublished, v)
			return nil, out, ferr
		}
		next, lerr := s.ds.Latest()
		if lerr != nil {
			return nil, res, lerr
		}
		s.log.Info("commit lost the race; retrying on the new parent", "plan", plan.ID, "parent", next.Version)
		return next, nil, nil
	default:
		return nil, res, err
	}
}

// commitCheck is rule 4 and rule 5 against the exact parent, run by the
// Lance commit on every attempt.
func (s *Session) commitCheck(plan *Plan) func(*lance.Manifest) error {
	return func(parent *lance.Manifest) error {
		ps, err := ParseState(parent.Config)
		if err != nil {
			return err
		}
		if ps.Epoch != s.epoch {
			return fmt.Errorf("version %d carries epoch %d, this publisher has %d: %w", parent.Version, ps.Epoch, s.epoch, ErrFenced)
		}
		switch plan.Standing(ps.Watermarks) {
		case StandingPublished:
			return errAlreadyPublished
		case StandingSuperseded:
			return errSuperseded
		}
		return nil
	}
}

// findPlan looks for a version after `after` that records planID, and
// returns it with the epoch it carries (its committer's).
func (s *Session) findPlan(planID string, after uint64) (uint64, uint64, bool, error) {
	latest, err := s.ds.LatestVersion()
	if err != nil {
		return 0, 0, false, err
	}
	for v := after + 1; v <= latest; v++ {
		m, err := s.ds.Manifest(v)
		if errors.Is(err, lance.ErrVersionNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, false, err
		}
		if m.Config[KeyPlan] == planID {
			st, err := ParseState(m.Config)
			if err != nil {
				return 0, 0, false, err
			}
			return v, st.Epoch, true, nil
		}
	}
	return 0, 0, false, nil
}

// finish confirms the publication durable, retires the plan and trims the
// WAL up to the watermarks of the latest durable version, with this epoch.
func (s *Session) finish(ctx context.Context, res *Result, plan *Plan, outcome Outcome, version uint64) (*Result, error) {
	res.Outcome, res.Version = outcome, version
	if version != 0 {
		// Confirmed by its own plan id (rule 23): a version that answered
		// this commit but records another plan had two winners.
		m, err := s.ds.Manifest(version)
		if err != nil {
			return res, fmt.Errorf("confirm version %d durable: %w", version, err)
		}
		if m.Config[KeyPlan] != plan.ID {
			return res, fmt.Errorf("confirm version %d: it records plan %q, this commit was plan %s: %w", version, m.Config[KeyPlan], plan.ID, errs.ErrCorrupt)
		}
		s.log.Info("published", "plan", plan.ID, "version", version, "rows", res.Rows, "files", len(res.Files))
	}
	if err := s.store.RetirePlan(ctx, plan, s.guard); err != nil {
		return res, err
	}
	if err := failpoint.Inject(ctx, failpoint.AfterCommitBeforeTrim, 0); err != nil {
		return res, err
	}
	m, err := s.ds.Latest()
	if err != nil {
		return res, err
	}
	// Rule 9: trim only what a durable version covers. A version found by
	// its plan id after an unknown outcome, or linked by a process that died
	// before its directory sync, is visible but not yet durable.
	if err := s.ds.SyncVersions(); err != nil {
		return res, fmt.Errorf("confirm version %d durable: %w", m.Version, err)
	}
	st, err := ParseState(m.Config)
	if err != nil {
		return res, err
	}
	res.Watermarks = st.Watermarks
	res.Trimmed = Watermarks{}
	// No trim through a version another process's failed fsync may cover.
	if err := s.claim.Valid(ctx); err != nil {
		return res, err
	}
	for _, r := range plan.Ranges {
		w := st.Watermarks[r.Shard]
		if w == 0 {
			continue
		}
		t, err := s.p.log.Trim(ctx, s.table, r.Shard, w, s.epoch)
		if err != nil {
			return res, fmt.Errorf("trim %s shard %d through %d: %w", s.table, r.Shard, w, err)
		}
		res.Trimmed[r.Shard] = t
	}
	if err := failpoint.Inject(ctx, failpoint.AfterTrim, 0); err != nil {
		return res, err
	}
	return res, nil
}
