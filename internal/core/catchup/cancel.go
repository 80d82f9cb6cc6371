package catchup

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// observedAdmission is what a cancellation is based on: the admission
// record's ModRevision when progress was observed. Every progress event
// and every new execution rewrites that record, so the CAS below loses to
// any of them.
type observedAdmission struct {
	rev  int64
	seq  uint64
	exec uint64
}

// cancelObserved is rule 15's cancellation: a CAS on the observed progress
// that closes commit admission and, in the same transaction, persists the
// termination intent in the table's record (phase terminating), so the
// controller drives the termination across API failures and restarts. It
// fails with ErrProgressAdvanced when progress or a new execution was
// recorded after obs, ErrNotActive when the table has no active catch-up;
// an already requested termination is not an error. Ambiguity
// (errs.ErrUnavailable): admission may or may not be closed; Status tells,
// and a repeat is safe.
func (s *Store) cancelObserved(ctx context.Context, table string, obs observedAdmission, term Termination) error {
	if s.hooks.beforeCancelCAS != nil {
		s.hooks.beforeCancelCAS(table)
	}
	for try := 0; try < maxTxnRetries; try++ {
		v, err := s.view(ctx, table, false)
		if err != nil {
			return err
		}
		switch {
		case v.target.Phase == PhaseTerminating:
			return nil
		case !v.target.Phase.Active() || v.target.Phase == PhaseFinishing || v.adm == nil:
			return fmt.Errorf("table %s: %w", table, ErrNotActive)
		case v.admRev != obs.rev:
			return fmt.Errorf("table %s: observed progress seq %d of execution %d, now seq %d of execution %d: %w",
				table, obs.seq, obs.exec, v.adm.Seq, v.adm.ExecID, ErrProgressAdvanced)
		}
		adm := *v.adm
		adm.Open, adm.ClosedReason = false, term.Reason
		rec := v.target
		term.ObservedSeq, term.ObservedExec = obs.seq, obs.exec
		rec.Phase, rec.Termination = PhaseTerminating, &term
		resp, err := s.txn(ctx, "cancel catch-up of table "+table,
			[]clientv3.Cmp{revGuard(s.k.admission(table), obs.rev), revGuard(s.k.target(table), v.targetRev)},
			clientv3.OpPut(s.k.admission(table), encode(KindAdmission, adm)),
			clientv3.OpPut(s.k.target(table), encode(KindTarget, rec)))
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("table %s: cancellation lost %d races in a row: %w", table, maxTxnRetries, errs.ErrConflict)
}

// Cancel is the operator's cancellation (the API's cancel endpoint, `walctl
// catchup cancel`). It observes the table's progress now and applies the
// same CAS as a stall cancellation: progress recorded between the
// observation and the CAS defeats it (ErrProgressAdvanced; the caller may
// try again). On success admission is closed and the termination intent is
// persisted; the controller terminates the Job and releases the slot once
// every Pod is terminal. An operator's cancellation does not count against
// the retry budget (outcome "cancelled"). ErrNotActive when there is
// nothing to cancel; ambiguity as for cancelObserved.
func (m *Master) Cancel(ctx context.Context, table, reason, by string) error {
	v, err := m.s.view(ctx, table, false)
	if err != nil {
		return err
	}
	if err := cancellable(v); err != nil {
		return err
	}
	if v.target.Phase == PhaseTerminating {
		return nil
	}
	if reason == "" {
		reason = "cancelled by operator"
	}
	obs := observedAdmission{rev: v.admRev, seq: v.adm.Seq, exec: v.adm.ExecID}
	err = m.s.cancelObserved(ctx, table, obs, Termination{Reason: reason, By: by, RequestedAt: m.s.now()})
	switch {
	case err == nil:
		m.s.metrics.cancellation("operator", "closed")
	case errors.Is(err, ErrProgressAdvanced):
		m.s.metrics.cancellation("operator", "defeated")
	}
	if err == nil {
		m.log.InfoContext(ctx, "catch-up cancellation requested", "table", table, "job", v.target.JobID,
			"by", by, "reason", reason, "observed_seq", obs.seq, "observed_exec", obs.exec)
	}
	return err
}

// cancellable refuses a cancellation that has nothing to stop: a Job that
// ended by itself keeps its outcome (ErrAlreadyFinished); no attempt at all
// is ErrNotActive, naming the last outcome.
func cancellable(v tableView) error {
	rec := v.target
	switch {
	case rec.Phase == PhaseFinishing:
		return fmt.Errorf("table %s: job %s already finished: %s at %s: %w", v.table, rec.JobID,
			finishedWord(rec.JobResult), rec.JobEndedAt.Format(time.RFC3339), ErrAlreadyFinished)
	case rec.Phase.Active() && v.adm != nil:
		return nil
	case rec.Outcome != "":
		return fmt.Errorf("table %s (its last job %s ended %s at %s): %w", v.table, rec.JobID,
			rec.Outcome, rec.FinishedAt.Format(time.RFC3339), ErrNotActive)
	}
	return fmt.Errorf("table %s: %w", v.table, ErrNotActive)
}

// alreadyFinished is the refusal for a Job found ended by itself.
func alreadyFinished(table, job string, st JobStatus, at time.Time) error {
	if !st.FinishedAt.IsZero() {
		at = st.FinishedAt
	}
	res := OutcomeFailure
	if st.State == JobSucceeded {
		res = OutcomeSuccess
	}
	return fmt.Errorf("table %s: job %s already finished: %s at %s (%s): %w", table, job,
		finishedWord(res), at.UTC().Format(time.RFC3339), st.Detail, ErrAlreadyFinished)
}

func finishedWord(o Outcome) string {
	if o == OutcomeSuccess {
		return "succeeded"
	}
	return "failed"
}

// Cancel is Master.Cancel with a look at the Job first: a Job that has
// already ended by itself (exit 0 or not) but was not yet observed is
// recorded as ended and the cancellation refused with ErrAlreadyFinished,
// so its real outcome stands. A Job that succeeds between this look and
// the CAS keeps its success too: the controller looks again before it
// terminates anything.
func (c *Controller) Cancel(ctx context.Context, table, reason, by string) error {
	v, err := c.s.view(ctx, table, false)
	if err != nil {
		return err
	}
	if v.target.Phase == PhaseRunning && v.target.Job != nil {
		st, ok, err := c.endedByItself(ctx, *v.target.Job)
		if err != nil {
			return err
		}
		if ok {
			rec := c.ended(v.target, st)
			if _, err := c.put(ctx, v, rec); err != nil {
				return err
			}
			c.q.Add(table)
			return alreadyFinished(table, rec.JobID, st, rec.JobEndedAt)
		}
	}
	return c.m.Cancel(ctx, table, reason, by)
}
