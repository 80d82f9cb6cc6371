package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/wal"
)

// Outcome of a round.
type Outcome string

// Round outcomes.
const (
	// OutcomeIdle: nothing sealed above the watermarks.
	OutcomeIdle Outcome = "idle"
	// OutcomePrepared: the plan's files are prepared and recorded, not committed
	// (Session.Prepare only).
	OutcomePrepared Outcome = "prepared"
	// OutcomePublished: this round committed the plan.
	OutcomePublished Outcome = "published"
	// OutcomeAlreadyPublished: the plan was found published (by a previous owner, or
	// by this round's ambiguous commit) and retired.
	OutcomeAlreadyPublished Outcome = "already-published"
	// OutcomeSuperseded: the table moved past the plan's start; it was retired and
	// the next round plans again.
	OutcomeSuperseded Outcome = "superseded"
)

// Result describes one round.
type Result struct {
	Table      string     `json:"table"`
	Outcome    Outcome    `json:"outcome"`
	Epoch      uint64     `json:"epoch"`
	Plan       string     `json:"plan"`
	Adopted    bool       `json:"adopted"` // the plan was pinned before this round
	Attempt    string     `json:"attempt"`
	Reused     bool       `json:"reused"` // the prepared files were reused, not written
	Files      []string   `json:"files"`
	Rows       uint64     `json:"rows"`
	Bytes      int64      `json:"bytes"` // WAL bytes covered
	Version    uint64     `json:"version"`
	Watermarks Watermarks `json:"watermarks"`
	Trimmed    Watermarks `json:"trimmed"`
	// UnsealedEntries and UnsealedGenerations count, in an idle round, the
	// WAL entries not published because their generations are still open
	// (`walctl wal seal` makes them publishable).
	UnsealedEntries     int64 `json:"unsealed_entries,omitempty"`
	UnsealedGenerations int   `json:"unsealed_generations,omitempty"`
}

// MarshalJSON writes every documented key whatever the outcome (an idle
// round has plan "", files [], version 0), so scripts need no defaults.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	p := plain(r)
	if p.Files == nil {
		p.Files = []string{}
	}
	if p.Watermarks == nil {
		p.Watermarks = Watermarks{}
	}
	if p.Trimmed == nil {
		p.Trimmed = Watermarks{}
	}
	return json.Marshal(p)
}

// Round runs one publication round in the order of rule 10: fence (once per
// ownership) → re-read latest → adopt or pin the plan → prepare or reuse →
// verify files → commit against the exact parent → confirm durable → trim.
// Until the session has fenced, a round first looks (writing nothing)
// whether there is anything to publish; if not it is idle without
// advancing the epoch or fencing.
//
// On cancellation it stops at the next step; a commit in flight is resolved
// by the next round (rule 6), never repeated blindly. A round that loses the
// claim or meets a newer epoch returns an error wrapping errs.ErrFenced and
// publishes nothing. A failed fsync stops the table in this process: the
// round returns a *StorageError (ErrStorageFailed) and so does every later
// round or Acquire of the table by this Publisher.
func (s *Session) Round(ctx context.Context) (*Result, error) {
	s.rounds++
	if err := s.p.stopped.check(s.table); err != nil {
		return &Result{Table: s.table, Epoch: s.epoch}, err
	}
	res, plan, prep, parent, err := s.prepareRound(ctx)
	if err == nil && plan != nil && prep != nil {
		res, err = s.publish(ctx, res, plan, prep, parent)
	}
	return res, s.p.stopped.note(s.table, err)
}

// Prepare runs a round up to the recorded descriptor set and stops before
// the commit: `walctl prepare`. A later Round (by this or any owner) adopts
// the pinned plan and reuses the files exactly.
func (s *Session) Prepare(ctx context.Context) (*Result, error) {
	s.rounds++
	if err := s.p.stopped.check(s.table); err != nil {
		return &Result{Table: s.table, Epoch: s.epoch}, err
	}
	res, plan, prep, _, err := s.prepareRound(ctx)
	if err == nil && plan != nil && prep != nil {
		res.Outcome = OutcomePrepared
	}
	return res, s.p.stopped.note(s.table, err)
}

func (s *Session) prepareRound(ctx context.Context) (*Result, *Plan, *Prepared, *lance.Manifest, error) {
	res := &Result{Table: s.table, Epoch: s.epoch}
	if err := s.claim.Err(); err != nil {
		return res, nil, nil, nil, err
	}
	if !s.fenced {
		// Nothing to publish: no epoch advance, no fence version.
		if work, err := s.probe(ctx, res); err != nil || !work {
			res.Outcome = OutcomeIdle
			return res, nil, nil, nil, err
		}
		if s.epoch == 0 {
			if err := s.commitGuard(ctx); err != nil {
				return res, nil, nil, nil, err
			}
			if err := s.advanceEpoch(ctx); err != nil {
				return res, nil, nil, nil, err
			}
			res.Epoch = s.epoch
		}
		if err := s.fence(ctx); err != nil {
			return res, nil, nil, nil, err
		}
	}
	m, err := s.ds.Latest()
	if err != nil {
		return res, nil, nil, nil, err
	}
	st, err := ParseState(m.Config)
	if err != nil {
		return res, nil, nil, nil, err
	}
	res.Watermarks = st.Watermarks
	if st.Epoch != s.epoch {
		return res, nil, nil, nil, fmt.Errorf("table %s version %d carries epoch %d, this publisher has %d: %w", s.table, m.Version, st.Epoch, s.epoch, ErrFenced)
	}
	plan, adopted, err := s.adoptOrPin(ctx, m, st, res)
	if err != nil || plan == nil {
		res.Outcome = OutcomeIdle
		return res, nil, nil, nil, err
	}
	res.Plan, res.Adopted, res.Bytes = plan.ID, adopted, plan.Bytes()
	prep, reused, err := s.prepareOrReuse(ctx, plan)
	if err != nil {
		return res, nil, nil, nil, err
	}
	res.Attempt, res.Reused = prep.Attempt, reused
	for _, f := range prep.Files {
		res.Files = append(res.Files, f.Descriptor.Path)
		res.Rows += f.Descriptor.Rows
	}
	return res, plan, prep, m, nil
}

// probe reports, writing nothing, whether the table has anything to
// publish: a pinned plan that starts at the latest watermarks, or sealed
// WAL entries above them. A table with no dataset yet starts at zero
// watermarks. It fails loudly when the WAL and the table disagree on
// positions (ErrWatermarkBehindTrim, ErrWatermarkAheadOfWAL); with nothing
// to publish it fills res's watermarks and unsealed counts.
func (s *Session) probe(ctx context.Context, res *Result) (bool, error) {
	w, err := s.p.LatestWatermarks(s.table)
	if err != nil {
		return false, err
	}
	// A table without a dataset has no plans directory either: none.
	plans, err := NewStoreOn(s.p.TableStore(s.table)).Plans()
	if err != nil {
		return false, err
	}
	for _, p := range plans {
		if p.Key() == planKey(s.table, w) && p.Standing(w) == StandingPublishable {
			return true, nil
		}
	}
	stats, err := s.p.log.Stats(ctx, s.table, w)
	if err != nil {
		return false, err
	}
	work := false
	for _, sh := range stats.Shards {
		if err := checkPositions(s.table, sh.Shard, w[sh.Shard], sh.TrimmedThrough, sh.LastPosition); err != nil {
			return false, err
		}
		work = work || sh.PendingGenerations > 0
	}
	if !work {
		res.Watermarks = w
		return false, s.unsealed(ctx, res, stats)
	}
	return true, nil
}

// unsealed counts, for an idle round's result, the entries of open
// generations: ACKed, not publishable until sealed.
func (s *Session) unsealed(ctx context.Context, res *Result, stats wal.TableStats) error {
	res.UnsealedEntries, res.UnsealedGenerations = 0, 0
	for _, sh := range stats.Shards {
		if sh.OpenGenerations == 0 {
			continue
		}
		gens, err := s.p.log.Generations(ctx, s.table, sh.Shard)
		if err != nil {
			return err
		}
		for _, g := range gens {
			if !g.Sealed && g.Entries > 0 {
				res.UnsealedGenerations++
				res.UnsealedEntries += int64(g.Entries)
			}
		}
	}
	return nil
}

// adoptOrPin retires pinned plans that no longer start at the latest
// watermarks (published or superseded), adopts the one that does, or plans
// from the WAL and pins the result. It returns nil when nothing is pending.
func (s *Session) adoptOrPin(ctx context.Context, m *lance.Manifest, st State, res *Result) (*Plan, bool, error) {
	plans, err := s.store.Plans()
	if err != nil {
		return nil, false, err
	}
	key := planKey(s.table, st.Watermarks)
	var adopt *Plan
	for _, p := range plans {
		if p.Table != s.table {
			return nil, false, fmt.Errorf("plan %s in %s names table %q", p.ID, s.ds.Root(), p.Table)
		}
		if p.Key() == key && p.Standing(st.Watermarks) == StandingPublishable {
			adopt = p
			continue
		}
		if err := s.store.RetirePlan(ctx, p, s.guard); err != nil {
			return nil, false, err
		}
		s.log.Info("retired stale plan", "plan", p.ID, "standing", p.Standing(st.Watermarks))
	}
	if adopt != nil {
		s.log.Info("adopted pinned plan", "plan", adopt.ID)
		return adopt, true, nil
	}
	plan, err := s.plan(ctx, m, st, res)
	if err != nil || plan == nil {
		return nil, false, err
	}
	pinned, mine, err := s.store.Pin(plan)
	if err != nil {
		return nil, false, err
	}
	if err := failpoint.Inject(ctx, failpoint.AfterPlanPin, 0); err != nil {
		return nil, false, err
	}
	return pinned, !mine, nil
}

func (s *Session) plan(ctx context.Context, m *lance.Manifest, st State, res *Result) (*Plan, error) {
	stats, err := s.p.log.Stats(ctx, s.table, st.Watermarks)
	if err != nil {
		return nil, err
	}
	var pending []Pending
	for _, sh := range stats.Shards {
		p := Pending{Shard: sh.Shard, Watermark: st.Watermarks[sh.Shard], TrimmedThrough: sh.TrimmedThrough, LastPosition: sh.LastPosition}
		if sh.PendingGenerations > 0 {
			if p.Generations, err = s.p.log.Generations(ctx, s.table, sh.Shard); err != nil {
				return nil, err
			}
		}
		pending = append(pending, p)
	}
	plan, err := BuildPlan(s.table, st.Watermarks, pending, s.p.cfg.Limits)
	if err == nil && plan == nil {
		err = s.unsealed(ctx, res, stats)
	}
	if err != nil || plan == nil {
		return nil, err
	}
	now := s.now()
	plan.ID = planID(plan.Key(), now)
	plan.PlannedOnVersion = m.Version
	plan.CreatedBy = s.p.cfg.Owner.ID
	plan.CreatedAt = now.UTC()
	return plan, nil
}

// prepareOrReuse reuses the newest recorded descriptor set of the plan that
// is the plan's own (its id and file ranges) and whose files all verify,
// retiring those that do not, or prepares a new attempt.
// Either way the plan's digests are recorded when it returns, so before its
// first commit (and any trim of what it covers).
func (s *Session) prepareOrReuse(ctx context.Context, plan *Plan) (*Prepared, bool, error) {
	attempts, err := s.store.Attempts(plan.ID)
	if err != nil {
		return nil, false, err
	}
	for _, a := range attempts {
		if err := a.matches(plan); err != nil {
			s.log.Warn("descriptor set does not match its plan; retiring the attempt", "attempt", a.Attempt, "err", err)
			if err := s.store.RetireAttempt(ctx, a, s.guard); err != nil {
				return nil, false, err
			}
			continue
		}
		if err := s.verify(a); err != nil {
			s.log.Warn("prepared files failed verification; retiring the attempt", "attempt", a.Attempt, "err", err)
			if err := s.store.RetireAttempt(ctx, a, s.guard); err != nil {
				return nil, false, err
			}
			continue
		}
		return a, true, s.ensureDigests(ctx, plan)
	}
	prep, err := s.prepare(ctx, plan)
	return prep, false, err
}

// guard is the claim's guard of a retirement (rule 8): a linearizable
// validation of the claim immediately before the record is moved.
func (s *Session) guard(ctx context.Context) error { return s.claim.Valid(ctx) }

// verifyFiles is how many files verify reads at once.
const verifyFiles = 4

// verify checks existence, size and checksum of every file (rule 7),
// verifyFiles at a time, and reports every file that fails.
func (s *Session) verify(p *Prepared) error {
	errs := make([]error, len(p.Files))
	var g errgroup.Group
	g.SetLimit(verifyFiles)
	for i, f := range p.Files {
		g.Go(func() error {
			errs[i] = s.ds.VerifyFile(f.Descriptor)
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}
