package catchup

import (
	"context"
	"time"
)

// Status is a table's catch-up status, the body of GET
// /api/v1/catchup?target=T and `walctl catchup status --output json`.
// The shape is stable; a field is JSON null when unknown or not applicable:
//
//	target                 the table
//	phase                  idle|reserved|starting|running|terminating|finishing
//	active                 a reservation and a slot are held
//	awaiting_handover      reserved, but a worker's claim is still held
//	job_id, job_uid,       the current (or, when idle, the last) Job's identity;
//	job_resource_version   uid/resource_version once created
//	slot                   the fleet slot held (null when idle)
//	attempt                the current or last attempt number (null: never)
//	progress               the admission record: admission_open, exec_id,
//	                       exec_started_at, seq, last_kind, last_progress_at,
//	                       heartbeat_at (null: no admission)
//	observation            the controller's stall reading (null on a master
//	                       that has not sampled the table)
//	termination_requested  termination intent is persisted
//	termination            reason, by, requested_at, observed_seq,
//	                       observed_exec, failure, done (null: none)
//	consecutive_failures   the retry budget used
//	next_retry             earliest readmission after a failure (null: none)
//	needs_attention        consecutive failures reached attention_after
//	outcome, outcome_detail, finished_at   the last finished attempt
//	stats                  the latest backlog statistics (null: none)
type Status struct {
	Target               string            `json:"target"`
	Phase                Phase             `json:"phase"`
	Active               bool              `json:"active"`
	AwaitingHandover     bool              `json:"awaiting_handover"`
	JobID                *string           `json:"job_id"`
	JobUID               *string           `json:"job_uid"`
	JobResourceVersion   *string           `json:"job_resource_version"`
	Slot                 *int              `json:"slot"`
	Attempt              *int              `json:"attempt"`
	Progress             *ProgressStatus   `json:"progress"`
	Observation          *StallObservation `json:"observation"`
	TerminationRequested bool              `json:"termination_requested"`
	Termination          *Termination      `json:"termination"`
	ConsecutiveFailures  int               `json:"consecutive_failures"`
	NextRetry            *time.Time        `json:"next_retry"`
	NeedsAttention       bool              `json:"needs_attention"`
	Outcome              *Outcome          `json:"outcome"`
	OutcomeDetail        *string           `json:"outcome_detail"`
	FinishedAt           *time.Time        `json:"finished_at"`
	Stats                *TableStats       `json:"stats"`
}

// ProgressStatus is the admission record as shown in Status.
type ProgressStatus struct {
	AdmissionOpen  bool          `json:"admission_open"`
	ClosedReason   *string       `json:"closed_reason"`
	ExecID         uint64        `json:"exec_id"`
	ExecStartedAt  *time.Time    `json:"exec_started_at"`
	Seq            uint64        `json:"seq"`
	LastKind       *ProgressKind `json:"last_kind"`
	LastProgressAt *time.Time    `json:"last_progress_at"`
	HeartbeatAt    *time.Time    `json:"heartbeat_at"`
}

// Status reads table's records at one revision (linearizable, read-only).
// Errors: errs.ErrInvalid for a bad name, coord.ErrUnknownRecord for a
// record this binary does not know, errs.ErrUnavailable. A table never
// admitted has phase idle and null fields.
func (s *Store) Status(ctx context.Context, table string) (Status, error) {
	v, err := s.view(ctx, table, false)
	if err != nil {
		return Status{}, err
	}
	r := v.target
	st := Status{
		Target: table, Phase: r.Phase, Active: r.Phase.Active(),
		AwaitingHandover:     r.Phase == PhaseReserved && v.claimedByPeer(),
		JobID:                nonZero(r.JobID),
		Attempt:              nonZero(r.Attempt),
		TerminationRequested: r.Termination != nil && r.Phase.Active(),
		ConsecutiveFailures:  r.ConsecutiveFailures,
		NextRetry:            nonZero(r.NextRetry),
		NeedsAttention:       r.NeedsAttention,
		Outcome:              nonZero(r.Outcome),
		OutcomeDetail:        nonZero(r.OutcomeDetail),
		FinishedAt:           nonZero(r.FinishedAt),
		Stats:                v.stats,
	}
	if r.Phase.Active() {
		st.Slot = ptr(r.Slot)
		st.Termination = r.Termination
	}
	if r.Job != nil {
		st.JobUID, st.JobResourceVersion = nonZero(r.Job.UID), nonZero(r.Job.ResourceVersion)
	}
	if a := v.adm; a != nil {
		st.Progress = &ProgressStatus{
			AdmissionOpen: a.Open, ClosedReason: nonZero(a.ClosedReason), ExecID: a.ExecID,
			ExecStartedAt: nonZero(a.ExecStartedAt), Seq: a.Seq, LastKind: nonZero(a.LastKind),
			LastProgressAt: nonZero(a.LastProgressAt),
		}
		if v.hb != nil && v.hb.ExecID == a.ExecID {
			st.Progress.HeartbeatAt = ptr(v.hb.At)
		}
	}
	return st, nil
}

// Status is Store.Status plus this controller's stall observation.
func (c *Controller) Status(ctx context.Context, table string) (Status, error) {
	st, err := c.s.Status(ctx, table)
	if err == nil && st.Active {
		if o, ok := c.Observation(table); ok {
			st.Observation = &o
		}
	}
	return st, err
}

func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
