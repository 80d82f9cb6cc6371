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
	var version uint64
	for attempt := 0; ; attempt++ {
		if attempt == s.p.cfg.CommitAttempts {
			return res, fmt.Errorf("commit %s: still contended after %d attempts: %w", plan.ID, attempt, errs.ErrConflict)
		}
		// Rule 7: verify every file immediately before every attempt.
		if err := s.verify(prep); err != nil {
			_ = s.store.RetireAttempt(ctx, prep, s.guard)
			return res, fmt.Errorf("plan %s attempt %s: %v: %w", plan.ID, prep.Attempt, err, ErrFilesDamaged)
		}
		// Early abort: the WAL already knows a newer publisher.
		we, err := s.p.log.Epoch(ctx, s.table)
		if err != nil {
			return res, err
		}
		if we != s.epoch {
			return res, fmt.Errorf("WAL publisher epoch of %s is %d, this publisher has %d: %w", s.table, we, s.epoch, ErrFenced)
		}
		if err := failpoint.Inject(ctx, failpoint.AfterWALEpochCheck, 0); err != nil {
			return res, err
		}
		if g := s.p.cfg.CommitGuard; g != nil {
			if err := g(ctx, s.table); err != nil {
				return res, err
			}
		}
		if err := s.claim.Err(); err != nil {
			return res, err
		}
		ps, err := ParseState(parent.Config)
		if err != nil {
			return res, err
		}
		end := ps.Watermarks.Clone()
		for _, r := range plan.Ranges {
			if r.To < ps.Watermarks[r.Shard] { // rule 6: never backwards
				return res, fmt.Errorf("plan %s would move shard %d's watermark back from %d to %d: %w", plan.ID, r.Shard, ps.Watermarks[r.Shard], r.To, errs.ErrCorrupt)
			}
			end[r.Shard] = r.To
		}
		cr, err := s.ds.Commit(ctx, lance.CommitRequest{
			ParentVersion: parent.Version,
			Kind:          lance.Append,
			Files:         files,
			ConfigSet:     publishDelta(end, plan.ID),
			TxnID:         newID(),
			Now:           s.p.cfg.Clock.Now,
			Check:         s.commitCheck(plan),
		})
		switch {
		case err == nil:
			version = cr.Version
		case errors.Is(err, errAlreadyPublished):
			return s.finish(ctx, res, plan, OutcomeAlreadyPublished, 0)
		case errors.Is(err, durable.ErrSyncFailed):
			// The manifest may be linked but a failed fsync covered it: a
			// later sync that succeeds proves nothing, so the plan id is not
			// looked up and nothing is trimmed (the table stops, see Round).
			return res, fmt.Errorf("commit plan %s on version %d: %w", plan.ID, parent.Version, err)
		case errors.Is(err, errSuperseded):
			if rerr := s.store.RetirePlan(ctx, plan, s.guard); rerr != nil {
				return res, rerr
			}
			res.Outcome = OutcomeSuperseded
			return res, nil
		case errors.Is(err, lance.ErrCommitConflict), errors.Is(err, lance.ErrCommitUnknown):
			// Lost the race, or do not know whether the link happened: look
			// for the plan id, never commit again blindly (rule 6).
			v, by, found, ferr := s.findPlan(plan.ID, parent.Version)
			if ferr != nil {
				return res, ferr
			}
			if found && by != s.epoch {
				// A successor adopted the plan and published it (a data
				// commit carries its committer's epoch): this attempt's
				// link lost to its fence, and this publisher is fenced out.
				return res, fmt.Errorf("plan %s was published in version %d at epoch %d, this publisher has %d: %w", plan.ID, v, by, s.epoch, ErrFenced)
			}
			if found {
				s.log.Info("commit resolved by the plan id recorded in the table", "plan", plan.ID, "version", v, "cause", err)
				version = v
				break
			}
			if parent, err = s.ds.Latest(); err != nil {
				return res, err
			}
			s.log.Info("commit lost the race; retrying on the new parent", "plan", plan.ID, "parent", parent.Version)
			continue
		default:
			return res, err
		}
		break
	}
	return s.finish(ctx, res, plan, OutcomePublished, version)
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
		if _, err := s.ds.Manifest(version); err != nil {
			return res, fmt.Errorf("confirm version %d durable: %w", version, err)
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
