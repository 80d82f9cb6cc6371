package catchup

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/coord"
)

// maxSteps bounds the guarded steps one reconcile takes before requeueing.
const maxSteps = 8

// reconcile moves table's catch-up forward by guarded steps and returns
// when to look again (0: only on an event). An error leaves the persisted
// intent in place; the caller retries with backoff.
func (c *Controller) reconcile(ctx context.Context, table string) (time.Duration, error) {
	for step := 0; step < maxSteps; step++ {
		v, err := c.s.view(ctx, table, false)
		if err != nil {
			return 0, err
		}
		var again bool
		var after time.Duration
		switch v.target.Phase {
		case PhaseIdle, "":
			c.forget(table)
			return 0, nil
		case PhaseReserved:
			again, after, err = c.handover(ctx, v)
		case PhaseStarting:
			again, after, err = c.start(ctx, v)
		case PhaseRunning:
			again, after, err = c.observe(ctx, v)
		case PhaseTerminating:
			again, after, err = c.terminate(ctx, v)
		case PhaseFinishing:
			again, after, err = c.finish(ctx, v)
		default:
			return 0, fmt.Errorf("etcd key %s: phase %q: %w", c.s.k.target(table), v.target.Phase, coord.ErrUnknownRecord)
		}
		if err != nil || !again {
			return after, err
		}
	}
	return time.Millisecond, nil
}

// put writes rec guarded by the target record read in v; false when the
// record changed meanwhile (the caller re-reads).
func (c *Controller) put(ctx context.Context, v tableView, rec targetRecord, extra ...clientv3.Cmp) (bool, error) {
	cmps := append([]clientv3.Cmp{revGuard(c.s.k.target(v.table), v.targetRev)}, extra...)
	resp, err := c.s.txn(ctx, "update catch-up record of table "+v.table, cmps,
		clientv3.OpPut(c.s.k.target(v.table), encode(KindTarget, rec)))
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// handover creates no Job while a worker (or any claim other than this
// Job's executor) holds the table: the reservation already excludes new
// claims, and the holder releases at the end of its slice; the claim's
// deletion wakes this table through the watch. Once the claim is gone the
// create intent is persisted, guarded by the claim's absence.
func (c *Controller) handover(ctx context.Context, v tableView) (bool, time.Duration, error) {
	if v.claimedByPeer() {
		c.log.DebugContext(ctx, "catch-up awaiting handover", "table", v.table, "job", v.target.JobID, "holder", v.claim.String())
		return false, c.p.ObserveInterval, nil
	}
	rec := v.target
	rec.Phase, rec.StartingAt = PhaseStarting, c.s.now()
	// A lost guard is not an error: the next step re-reads.
	_, err := c.put(ctx, v, rec, clientv3.Compare(clientv3.CreateRevision(c.s.k.claim(v.table)), "=", v.claimRev))
	return true, 0, err
}

// start creates the Job (idempotent by its deterministic name) and records
// its identity. If the record moved on meanwhile (cancelled, another
// master), a Job this call created for an attempt that is no longer
// current is terminated at once.
func (c *Controller) start(ctx context.Context, v tableView) (bool, time.Duration, error) {
	if err := c.s.acting(); err != nil {
		return false, 0, err
	}
	ref, err := c.r.Create(ctx, c.s.jobSpec(c.p, v.target))
	if err != nil {
		return false, 0, fmt.Errorf("create catch-up job %s for table %s: %w", v.target.JobID, v.table, err)
	}
	rec := v.target
	rec.Phase, rec.Job, rec.JobCreatedAt = PhaseRunning, &ref, c.s.now()
	ok, err := c.put(ctx, v, rec)
	if err != nil {
		return false, 0, err
	}
	if ok {
		c.log.InfoContext(ctx, "catch-up job created", "table", v.table, "job", ref.Name, "uid", ref.UID, "attempt", rec.Attempt)
		return true, 0, nil
	}
	now, err := c.s.view(ctx, v.table, false)
	if err != nil {
		return false, 0, err
	}
	if now.target.JobID != ref.Name || now.target.Phase == PhaseIdle {
		c.log.WarnContext(ctx, "catch-up job created for an attempt no longer current; terminating it", "table", v.table, "job", ref.Name)
		if err := c.r.Terminate(ctx, ref); err != nil && !errors.Is(err, ErrJobNotFound) {
			return false, 0, err
		}
	}
	return true, 0, nil
}

// observe follows a running Job: its end moves the record to finishing;
// otherwise the admission record is sampled and a confirmed stall cancels
// by CAS on exactly the sampled revision.
func (c *Controller) observe(ctx context.Context, v tableView) (bool, time.Duration, error) {
	rec := v.target
	if rec.Job == nil {
		return false, 0, fmt.Errorf("table %s is running job %s without a recorded identity: %w", v.table, rec.JobID, coord.ErrUnknownRecord)
	}
	st, err := c.r.Get(ctx, *rec.Job)
	switch {
	case errors.Is(err, ErrJobNotFound):
		st = JobStatus{Ref: *rec.Job, State: JobFailed, Detail: "the job disappeared"}
	case err != nil:
		return false, 0, err
	}
	if st.State == JobSucceeded || st.State == JobFailed {
		c.log.InfoContext(ctx, "catch-up job ended", "table", v.table, "job", rec.JobID, "state", st.State, "detail", st.Detail)
		// A lost guard is not an error: the next step re-reads.
		_, err := c.put(ctx, v, c.ended(rec, st))
		return true, 0, err
	}
	now := c.s.now()
	if v.adm == nil {
		return false, 0, fmt.Errorf("table %s is running job %s without an admission record: %w", v.table, rec.JobID, coord.ErrUnknownRecord)
	}
	o := c.detector(v.table).observe(progressSample{At: now, ExecID: v.adm.ExecID, Seq: v.adm.Seq})
	c.record(v.table, o)
	c.s.metrics.verdict(o)
	if o.Verdict != VerdictStalled {
		return false, c.p.ObserveInterval, nil
	}
	obs := observedAdmission{rev: v.admRev, seq: v.adm.Seq, exec: v.adm.ExecID}
	err = c.s.cancelObserved(ctx, v.table, obs, Termination{Reason: "stalled: " + o.Detail, By: "controller", RequestedAt: now, Failure: true})
	switch {
	case errors.Is(err, ErrProgressAdvanced):
		c.s.metrics.cancellation("controller", "defeated")
		c.log.InfoContext(ctx, "catch-up stall cancellation defeated by progress", "table", v.table, "job", rec.JobID, "err", err)
		return false, c.p.ObserveInterval, nil
	case err != nil:
		return false, 0, err
	}
	c.s.metrics.cancellation("controller", "closed")
	c.log.WarnContext(ctx, "catch-up job stalled; admission closed, terminating", "table", v.table, "job", rec.JobID,
		"seq", obs.seq, "exec", obs.exec, "detail", o.Detail)
	return true, 0, nil
}

// ended is rec moved to finishing with the outcome of a Job that ended by
// itself.
func (c *Controller) ended(rec targetRecord, st JobStatus) targetRecord {
	rec.Phase, rec.OutcomeDetail, rec.JobEndedAt = PhaseFinishing, st.Detail, utc(st.FinishedAt)
	if rec.JobEndedAt.IsZero() {
		rec.JobEndedAt = c.s.now()
	}
	rec.JobResult = OutcomeFailure
	if st.State == JobSucceeded {
		rec.JobResult = OutcomeSuccess
	}
	return rec
}

// endedByItself reads the recorded Job: a Job that has ended by itself
// (not by a deletion) is returned with ok, so that a termination requested
// after its end keeps its real outcome instead of "cancelled".
func (c *Controller) endedByItself(ctx context.Context, ref JobRef) (JobStatus, bool, error) {
	st, err := c.r.Get(ctx, ref)
	switch {
	case errors.Is(err, ErrJobNotFound):
		return st, false, nil
	case err != nil:
		return st, false, err
	}
	return st, !st.Deleting && (st.State == JobSucceeded || st.State == JobFailed), nil
}

// terminate drives the persisted termination intent: Runner.Terminate with
// the recorded UID and resourceVersion (refreshed from the runner when
// stale, never dropped), then waits until every Pod is terminal before the
// slot is released.
func (c *Controller) terminate(ctx context.Context, v tableView) (bool, time.Duration, error) {
	rec := v.target
	t := Termination{Reason: "termination requested", Failure: true}
	if rec.Termination != nil {
		t = *rec.Termination
	}
	if !t.Done {
		if rec.Job == nil && rec.StartingAt.IsZero() {
			return c.release(ctx, v, t) // never got as far as a create: no Job
		}
		if rec.Job == nil {
			// The create intent is persisted but its outcome is not: the
			// Job, if any, holds the record's deterministic name.
			st, err := c.r.Get(ctx, JobRef{Name: rec.JobID})
			if errors.Is(err, ErrJobNotFound) {
				return c.release(ctx, v, t)
			}
			if err != nil {
				return false, 0, err
			}
			rec.Job = &st.Ref
			// A lost guard is not an error: the next step re-reads.
			_, err = c.put(ctx, v, rec)
			return true, 0, err
		}
		// A Job that succeeded before it could be terminated keeps its
		// success; a failed exit now is most likely the executor obeying
		// the closed admission, so the termination's own outcome stands.
		if st, ok, err := c.endedByItself(ctx, *rec.Job); err != nil {
			return false, 0, err
		} else if ok && st.State == JobSucceeded {
			c.log.InfoContext(ctx, "catch-up job had succeeded before its termination; keeping its outcome",
				"table", v.table, "job", rec.JobID, "state", st.State, "detail", st.Detail)
			rec = c.ended(rec, st)
			rec.Termination = nil
			// A lost guard is not an error: the next step re-reads.
			_, err := c.put(ctx, v, rec)
			return true, 0, err
		}
		err := c.terminateJob(ctx, *rec.Job)
		switch {
		case err == nil || errors.Is(err, ErrJobNotFound):
			t.Done = true
			rec.Termination = &t
			c.log.InfoContext(ctx, "catch-up job terminated", "table", v.table, "job", rec.Job.Name, "uid", rec.Job.UID)
			// A lost guard is not an error: the next step re-reads.
			_, err := c.put(ctx, v, rec)
			return true, 0, err
		case errors.Is(err, ErrJobPrecondition):
			// Re-read exactly the recorded Job (name and UID): a newer
			// resourceVersion is adopted; a Job of another UID under the
			// name is not the one this record started and is left alone.
			st, gerr := c.r.Get(ctx, *rec.Job)
			if errors.Is(gerr, ErrJobNotFound) {
				c.log.WarnContext(ctx, "recorded catch-up job is gone", "table", v.table, "job", rec.Job.String())
				t.Done = true
				rec.Termination = &t
			} else if gerr != nil {
				return false, 0, gerr
			} else {
				rec.Job = &st.Ref
			}
			// A lost guard is not an error: the next step re-reads.
			_, err := c.put(ctx, v, rec)
			return true, 0, err
		default:
			return false, 0, fmt.Errorf("terminate catch-up job %s: %w", rec.JobID, err)
		}
	}
	if rec.Job != nil {
		done, err := c.r.PodsTerminal(ctx, *rec.Job)
		if err != nil {
			return false, 0, err
		}
		if !done {
			return false, c.p.ObserveInterval, nil
		}
	}
	return c.release(ctx, v, t)
}

// terminateJob is Runner.Terminate for a controller still within its
// leadership term (a deposed leader terminates nothing).
func (c *Controller) terminateJob(ctx context.Context, ref JobRef) error {
	if err := c.s.acting(); err != nil {
		return err
	}
	return c.r.Terminate(ctx, ref)
}

// finish waits for every Pod of a Job that ended by itself, then releases.
func (c *Controller) finish(ctx context.Context, v tableView) (bool, time.Duration, error) {
	if v.target.Job != nil {
		done, err := c.r.PodsTerminal(ctx, *v.target.Job)
		if err != nil {
			return false, 0, err
		}
		if !done {
			return false, c.p.ObserveInterval, nil
		}
	}
	failure := v.target.JobResult != OutcomeSuccess
	return c.release(ctx, v, Termination{Reason: v.target.OutcomeDetail, Failure: failure, Done: true, By: string(v.target.JobResult)})
}

// release ends the attempt in one transaction: the record goes idle with
// its outcome and failure budget, and the admission, heartbeat,
// reservation and slot are deleted (the last two only if still this Job's).
func (c *Controller) release(ctx context.Context, v tableView, t Termination) (bool, time.Duration, error) {
	rec := v.target
	outcome := OutcomeCancelled
	switch {
	case rec.Phase == PhaseFinishing && rec.JobResult == OutcomeSuccess:
		outcome = OutcomeSuccess
	case t.Failure:
		outcome = OutcomeFailure
	}
	now := c.s.now()
	afterOutcome(c.p, &rec, outcome, now)
	rec.OutcomeDetail = t.Reason
	if v.adm != nil && v.adm.ExecID > rec.LastExecID {
		rec.LastExecID = v.adm.ExecID
	}
	slot := rec.Slot
	rec.Phase, rec.Slot = PhaseIdle, -1
	res, sk := c.s.k.reservation(v.table), c.s.k.slot(slot)
	resp, err := c.s.txn(ctx, "release catch-up of table "+v.table,
		[]clientv3.Cmp{revGuard(c.s.k.target(v.table), v.targetRev), revGuard(c.s.k.admission(v.table), v.admRev)},
		clientv3.OpPut(c.s.k.target(v.table), encode(KindTarget, rec)),
		clientv3.OpDelete(c.s.k.admission(v.table)),
		clientv3.OpDelete(c.s.k.heartbeat(v.table)),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(res), "=", reservationValue(v.table, rec.JobID))},
			[]clientv3.Op{clientv3.OpDelete(res)}, nil),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(sk), "=", slotValue(slot, v.table, rec.JobID))},
			[]clientv3.Op{clientv3.OpDelete(sk)}, nil),
	)
	if err != nil {
		return false, 0, err
	}
	if !resp.Succeeded {
		return true, 0, nil
	}
	c.forget(v.table)
	c.log.InfoContext(ctx, "catch-up released", "table", v.table, "job", rec.JobID, "slot", slot, "outcome", outcome,
		"detail", t.Reason, "consecutive_failures", rec.ConsecutiveFailures, "next_retry", rec.NextRetry,
		"needs_attention", rec.NeedsAttention)
	return false, 0, nil
}
