package catchup

import (
	"context"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// List is every table holding a catch-up reservation, read at one etcd
// revision: the body of `walctl catchup list --output json` (stable):
//
//	revision       the etcd revision of the read
//	observed_at    when it was read (ages are relative to it)
//	slots_used     fleet slots held
//	reservations   one entry per table with a reservation or an active record,
//	               sorted by table:
//	  table, phase, job_id, job_uid, slot, attempt   the Job (null: not yet)
//	  admitted_at                                    when the reservation was written
//	  admission_open, exec_id, seq                   the admission record (null: none)
//	  last_progress_at                               the last recorded progress (null: none yet)
//	  last_progress_age_seconds                      observed_at − last_progress_at (null: none yet)
//	  termination_requested                          termination intent is persisted
type List struct {
	Revision     int64       `json:"revision"`
	ObservedAt   time.Time   `json:"observed_at"`
	SlotsUsed    int         `json:"slots_used"`
	Reservations []ListEntry `json:"reservations"`
	// Budgets is every target's retry budget (for metrics, not printed).
	Budgets []TargetBudget `json:"-"`
}

// ListEntry is one table of List.
type ListEntry struct {
	Table                string     `json:"table"`
	Phase                Phase      `json:"phase"`
	JobID                *string    `json:"job_id"`
	JobUID               *string    `json:"job_uid"`
	Slot                 *int       `json:"slot"`
	Attempt              *int       `json:"attempt"`
	AdmittedAt           *time.Time `json:"admitted_at"`
	AdmissionOpen        *bool      `json:"admission_open"`
	ExecID               *uint64    `json:"exec_id"`
	Seq                  *uint64    `json:"seq"`
	LastProgressAt       *time.Time `json:"last_progress_at"`
	LastProgressAge      *float64   `json:"last_progress_age_seconds"`
	TerminationRequested bool       `json:"termination_requested"`
}

// TargetBudget is one table's retry budget.
type TargetBudget struct {
	Table               string
	ConsecutiveFailures int
	NeedsAttention      bool
}

// List reads every reservation, target, admission and slot record in one
// linearizable transaction (read-only). A record this binary does not know
// fails closed (coord.ErrUnknownRecord); etcd trouble is errs.ErrUnavailable.
func (s *Store) List(ctx context.Context) (List, error) {
	pfx := func(k string) clientv3.Op { return clientv3.OpGet(k, clientv3.WithPrefix()) }
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Txn(cctx).Then(pfx(s.k.reservationsDir()), pfx(s.k.targetsDir()),
		pfx(s.k.dir()+"admission/"), pfx(s.k.slotsDir())).Commit()
	cancel()
	if err != nil {
		return List{}, unavailable(ctx, s.c, "list catch-up reservations", err)
	}
	now := s.now()
	l := List{Revision: resp.Header.Revision, ObservedAt: now, Reservations: []ListEntry{},
		SlotsUsed: len(resp.Responses[3].GetResponseRange().Kvs)}
	entries := map[string]*ListEntry{}
	entry := func(t string) *ListEntry {
		if entries[t] == nil {
			entries[t] = &ListEntry{Table: t, Phase: PhaseIdle}
		}
		return entries[t]
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		r, err := decodeReservation(kv)
		if err != nil {
			return List{}, err
		}
		entry(r.Table).JobID = nonZero(r.JobID)
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var rec targetRecord
		if err := decodeKV(kv, KindTarget, &rec); err != nil {
			return List{}, err
		}
		l.Budgets = append(l.Budgets, TargetBudget{rec.Table, rec.ConsecutiveFailures, rec.NeedsAttention})
		if !rec.Phase.Active() && entries[rec.Table] == nil {
			continue
		}
		e := entry(rec.Table)
		e.Phase, e.JobID, e.Attempt, e.AdmittedAt = rec.Phase, nonZero(rec.JobID), nonZero(rec.Attempt), nonZero(rec.ReservedAt)
		e.TerminationRequested = rec.Phase.Active() && rec.Termination != nil
		if rec.Phase.Active() {
			e.Slot = ptr(rec.Slot)
		}
		if rec.Job != nil {
			e.JobUID = nonZero(rec.Job.UID)
		}
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var a admissionRecord
		if err := decodeKV(kv, KindAdmission, &a); err != nil {
			return List{}, err
		}
		e := entries[a.Table]
		if e == nil {
			continue
		}
		e.AdmissionOpen, e.ExecID, e.Seq, e.LastProgressAt = ptr(a.Open), ptr(a.ExecID), ptr(a.Seq), nonZero(a.LastProgressAt)
		if e.LastProgressAt != nil {
			e.LastProgressAge = ptr(now.Sub(*e.LastProgressAt).Seconds())
		}
	}
	for _, e := range entries {
		l.Reservations = append(l.Reservations, *e)
	}
	sort.Slice(l.Reservations, func(i, j int) bool { return l.Reservations[i].Table < l.Reservations[j].Table })
	return l, nil
}
