package catchup

import (
	"context"
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// Master is the catch-up side of `walctl master run`: admission (for the
// API and the scan), cancellation and status, under the persisted policy.
type Master struct {
	s         *Store
	p         Policy
	policyRev int64
	log       *slog.Logger
}

// OpenMaster persists p on the first start of any master, or checks it
// against the persisted policy, and returns the Master. A different
// persisted policy fails closed with *PolicyMismatchError (ErrPolicyMismatch)
// naming the differing fields; an unknown policy record with
// coord.ErrUnknownRecord; an invalid p with errs.ErrInvalid. Idempotent: an
// ambiguous failure (errs.ErrUnavailable) is resolved by calling again.
func OpenMaster(ctx context.Context, s *Store, p Policy, log *slog.Logger) (*Master, error) {
	p, rev, err := s.ensurePolicy(ctx, p)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Master{s: s, p: p, policyRev: rev, log: log}, nil
}

// Policy returns the master's normalized policy.
func (m *Master) Policy() Policy { return m.p }

// Store returns the master's Store.
func (m *Master) Store() *Store { return m.s }

// Request asks for a table's catch-up (POST /api/v1/catchup, or the scan).
type Request struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
	DryRun bool   `json:"dry_run"`
	// Source is "api" or "scan" (recorded, not trusted for anything).
	Source string `json:"-"`
}

// Admission is the answer to a Request. JSON (stable): target, decision,
// message, dry_run, job_id, attempt, slot; job_id, attempt and slot are
// null when no Job is concerned (for "eligible" they name the Job a real
// request would reserve).
type Admission struct {
	Target   string   `json:"target"`
	Decision Decision `json:"decision"`
	Message  string   `json:"message"`
	DryRun   bool     `json:"dry_run"`
	JobID    *string  `json:"job_id"`
	Attempt  *int     `json:"attempt"`
	Slot     *int     `json:"slot"`
}

const maxTxnRetries = 8

// Admit is rule 14's one admission path. It reads the table's records, the
// policy and every slot at one revision, decides (see Decision), and for an
// admitted request writes, in one transaction, the table's record (attempt
// + 1, deterministic Job identity, slot), the coord reservation (ordinary
// claims then exclude the table), the slot key and an open commit
// admission. The transaction is guarded by every record it read: a lost
// race (another master, a new claim, a scan) re-reads and decides again,
// so of two masters racing for one table one reserves and the other
// coalesces (already_active), and slots never exceed max_jobs.
//
// Nothing is written for any other decision, nor for a dry run. A repeat
// for an active table coalesces and leaves the failure budget unchanged.
// Errors: errs.ErrInvalid (bad name), coord.ErrUnknownRecord (fail closed),
// ErrPolicyMismatch (the persisted policy changed under this master),
// errs.ErrUnavailable — after which the reservation may or may not have been
// written: Status (or a repeat, which coalesces) tells.
func (m *Master) Admit(ctx context.Context, req Request) (Admission, error) {
	a, err := m.admit(ctx, req)
	if err == nil {
		m.s.metrics.admission(a.Decision, req.Source)
	}
	return a, err
}

func (m *Master) admit(ctx context.Context, req Request) (Admission, error) {
	table := req.Target
	for try := 0; try < maxTxnRetries; try++ {
		v, err := m.s.view(ctx, table, true)
		if err != nil {
			return Admission{}, err
		}
		if v.policyRev != m.policyRev {
			return Admission{}, fmt.Errorf("etcd key %s changed since this master started (revision %d, now %d): %w",
				m.s.k.policy(), m.policyRev, v.policyRev, ErrPolicyMismatch)
		}
		now := m.s.now()
		in := admissionInput{
			now: now, owned: m.p.Owns(table), active: v.target.Phase.Active() || v.resv != nil,
			stats: v.stats, lastSuccessAt: v.target.LastSuccessAt, nextRetry: v.target.NextRetry,
			slotsUsed: len(v.slots), claimedByPeer: v.claimedByPeer(), dryRun: req.DryRun,
		}
		d, msg := decide(m.p, in)
		out := Admission{Target: table, Decision: d, Message: msg, DryRun: req.DryRun}
		switch {
		case d == DecisionAlreadyActive && v.target.Phase.Active():
			out.JobID, out.Attempt, out.Slot = ptr(v.target.JobID), ptr(v.target.Attempt), ptr(v.target.Slot)
		case d == DecisionAlreadyActive && v.resv != nil:
			out.JobID = ptr(v.resv.JobID)
		case d == DecisionEligible:
			out.JobID = ptr(JobName(m.s.c.Prefix(), table, v.target.Attempt+1))
			out.Attempt, out.Slot = ptr(v.target.Attempt+1), ptr(freeSlot(usedSlots(v.slots), m.p.MaxJobs))
		}
		if !d.Admitted() {
			return out, nil
		}
		slot := freeSlot(usedSlots(v.slots), m.p.MaxJobs)
		if slot < 0 { // only slots beyond max_jobs are free: a foreign writer
			out.Decision, out.Message = DecisionCapacityExhausted, fmt.Sprintf("no slot below %d is free", m.p.MaxJobs)
			return out, nil
		}
		rec := v.target
		rec.header = hdr(KindTarget)
		rec.Phase, rec.Attempt, rec.Slot = PhaseReserved, rec.Attempt+1, slot
		rec.JobID = JobName(m.s.c.Prefix(), table, rec.Attempt)
		rec.Reason, rec.Source, rec.ReservedAt = req.Reason, req.Source, now
		rec.StartingAt, rec.Job, rec.JobCreatedAt, rec.JobResult, rec.Termination = zeroTime, nil, zeroTime, "", nil
		adm := admissionRecord{header: hdr(KindAdmission), Table: table, JobID: rec.JobID, Attempt: rec.Attempt,
			Open: true, AdmittedAt: now, ExecID: rec.LastExecID, Seq: 0}
		claimCmp := clientv3.Compare(clientv3.CreateRevision(m.s.k.claim(table)), "=", v.claimRev)
		resp, err := m.s.txn(ctx, "reserve table "+table,
			[]clientv3.Cmp{
				revGuard(m.s.k.target(table), v.targetRev),
				revGuard(m.s.k.policy(), v.policyRev),
				revGuard(m.s.k.stats(table), v.statsRev),
				revGuard(m.s.k.admission(table), v.admRev),
				clientv3.Compare(clientv3.CreateRevision(m.s.k.reservation(table)), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(m.s.k.slot(slot)), "=", 0),
				claimCmp,
			},
			clientv3.OpPut(m.s.k.target(table), encode(KindTarget, rec)),
			clientv3.OpPut(m.s.k.reservation(table), reservationValue(table, rec.JobID)),
			clientv3.OpPut(m.s.k.slot(slot), slotValue(slot, table, rec.JobID)),
			clientv3.OpPut(m.s.k.admission(table), encode(KindAdmission, adm)),
			clientv3.OpDelete(m.s.k.heartbeat(table)),
		)
		if err != nil {
			return Admission{}, err
		}
		if !resp.Succeeded {
			continue
		}
		out.JobID, out.Attempt, out.Slot = ptr(rec.JobID), ptr(rec.Attempt), ptr(slot)
		m.log.InfoContext(ctx, "catch-up reserved", "table", table, "job", rec.JobID, "attempt", rec.Attempt,
			"slot", slot, "decision", d, "source", req.Source, "reason", req.Reason)
		return out, nil
	}
	return Admission{}, fmt.Errorf("table %s: admission lost %d races in a row: %w", table, maxTxnRetries, errs.ErrConflict)
}

// txn runs one guarded transaction with a deadline; op names it in errors.
// On a Guarded store it is leaderTxn.
func (s *Store) txn(ctx context.Context, op string, cmps []clientv3.Cmp, then ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if s.term != nil {
		return s.leaderTxn(ctx, op, cmps, then)
	}
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Txn(cctx).If(cmps...).Then(then...).Commit()
	cancel()
	if err != nil {
		return nil, unavailable(ctx, s.c, op+" (outcome unknown)", err)
	}
	return resp, nil
}

func usedSlots(slots map[int]slotRecord) map[int]bool {
	used := make(map[int]bool, len(slots))
	for n := range slots {
		used[n] = true
	}
	return used
}

func ptr[T any](v T) *T { return &v }

// Guarded returns m acting under the leadership term t: every write of
// its admissions, cancellations, scans and controller (built on it) is
// guarded by t (Store.Guarded).
func (m *Master) Guarded(t *Term) *Master {
	g := *m
	g.s = m.s.Guarded(t)
	return &g
}
