package catchup

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// header is common to every record (coord's records have the same shape).
type header struct {
	Kind          string `json:"kind"`
	SchemaVersion int    `json:"schema_version"`
}

// Phase is where a table's catch-up stands.
type Phase string

// Phases of a target record, in order.
const (
	// PhaseIdle: no reservation; the record keeps the failure budget.
	PhaseIdle Phase = "idle"
	// PhaseReserved: reservation and slot written; waiting for a worker's
	// claim to go (awaiting handover) before the Job is created.
	PhaseReserved Phase = "reserved"
	// PhaseStarting: the create intent is persisted; the Job may exist.
	PhaseStarting Phase = "starting"
	// PhaseRunning: the Job exists and its identity is recorded.
	PhaseRunning Phase = "running"
	// PhaseTerminating: admission closed and termination intent persisted;
	// the controller drives Runner.Terminate, then waits for every Pod.
	PhaseTerminating Phase = "terminating"
	// PhaseFinishing: the Job ended by itself; waiting for every Pod.
	PhaseFinishing Phase = "finishing"
)

// Active reports whether the phase holds a reservation and a slot.
func (p Phase) Active() bool { return p != PhaseIdle && p != "" }

// Outcome is how the last attempt ended.
type Outcome string

// Outcomes.
const (
	OutcomeSuccess   Outcome = "success"
	OutcomeFailure   Outcome = "failure"
	OutcomeCancelled Outcome = "cancelled"
)

// Termination is the persisted termination intent (rule 16).
type Termination struct {
	Reason      string    `json:"reason"`
	By          string    `json:"by"`
	RequestedAt time.Time `json:"requested_at"`
	// ObservedSeq and ObservedExec are the progress the cancellation CAS
	// was based on.
	ObservedSeq  uint64 `json:"observed_seq"`
	ObservedExec uint64 `json:"observed_exec"`
	// Failure says whether the attempt counts against the retry budget
	// (a stall does, an operator's cancel does not).
	Failure bool `json:"failure"`
	// Done: Runner.Terminate was accepted (or the Job was already gone).
	Done bool `json:"done"`
}

// targetRecord is the value of <prefix>/catchup/targets/<table>.
type targetRecord struct {
	header
	Table   string `json:"table"`
	Phase   Phase  `json:"phase"`
	Attempt int    `json:"attempt"`
	JobID   string `json:"job_id,omitempty"`
	Slot    int    `json:"slot"`

	Reason       string    `json:"reason,omitempty"`
	Source       string    `json:"source,omitempty"`
	ReservedAt   time.Time `json:"reserved_at,omitzero"`
	StartingAt   time.Time `json:"starting_at,omitzero"`
	Job          *JobRef   `json:"job,omitempty"`
	JobCreatedAt time.Time `json:"job_created_at,omitzero"`
	JobResult    Outcome   `json:"job_result,omitempty"`
	// JobEndedAt is when the Job ended by itself (phase finishing).
	JobEndedAt  time.Time    `json:"job_ended_at,omitzero"`
	Termination *Termination `json:"termination,omitempty"`

	ConsecutiveFailures int       `json:"consecutive_failures"`
	NextRetry           time.Time `json:"next_retry,omitzero"`
	NeedsAttention      bool      `json:"needs_attention"`
	Outcome             Outcome   `json:"outcome,omitempty"`
	OutcomeDetail       string    `json:"outcome_detail,omitempty"`
	FinishedAt          time.Time `json:"finished_at,omitzero"`
	LastSuccessAt       time.Time `json:"last_success_at,omitzero"`
	// LastExecID is the highest execution id ever begun for the table, so
	// execution ids grow across admissions.
	LastExecID uint64 `json:"last_exec_id"`
}

// slotRecord is the value of <prefix>/catchup/slots/<n>.
type slotRecord struct {
	header
	Slot  int    `json:"slot"`
	Table string `json:"table"`
	JobID string `json:"job_id"`
}

// admissionRecord is the value of <prefix>/catchup/admission/<table>: the
// one key the executor writes, so that a cancellation CAS on its
// ModRevision is defeated by exactly the events rule 15 names.
type admissionRecord struct {
	header
	Table        string    `json:"table"`
	JobID        string    `json:"job_id"`
	Attempt      int       `json:"attempt"`
	Open         bool      `json:"open"`
	ClosedReason string    `json:"closed_reason,omitempty"`
	AdmittedAt   time.Time `json:"admitted_at"`
	// ExecID is the current execution (0: none has begun); it only grows.
	ExecID        uint64    `json:"exec_id"`
	ExecStartedAt time.Time `json:"exec_started_at,omitzero"`
	// Seq counts recorded progress events across the admission.
	Seq            uint64       `json:"seq"`
	LastKind       ProgressKind `json:"last_kind,omitempty"`
	LastProgressAt time.Time    `json:"last_progress_at,omitzero"`
}

// heartbeatRecord is the value of <prefix>/catchup/heartbeats/<table>.
type heartbeatRecord struct {
	header
	Table  string    `json:"table"`
	JobID  string    `json:"job_id"`
	ExecID uint64    `json:"exec_id"`
	At     time.Time `json:"at"`
}

type policyRecord struct {
	header
	Policy
}

type statsRecord struct {
	header
	TableStats
}

type reservationRecord struct {
	header
	coord.Reservation
}

// decode checks kind and schema version before decoding, so a record of
// another kind or written by a newer binary fails closed, naming the key.
func decode(key string, data []byte, kind string, version int, v any) error {
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("etcd key %s: unparsable record: %v: %w", key, err, errs.ErrCorrupt)
	}
	if h.Kind != kind {
		return fmt.Errorf("etcd key %s: record kind %q, want %q: %w", key, h.Kind, kind, coord.ErrUnknownRecord)
	}
	if h.SchemaVersion < 1 || h.SchemaVersion > version {
		return fmt.Errorf("etcd key %s: %s record schema version %d, this binary knows 1..%d: %w",
			key, kind, h.SchemaVersion, version, coord.ErrUnknownRecord)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("etcd key %s: unparsable %s record: %v: %w", key, kind, err, errs.ErrCorrupt)
	}
	return nil
}

func decodeKV[T any](kv *mvccpb.KeyValue, kind string, v *T) error {
	return decode(string(kv.Key), kv.Value, kind, SchemaVersion, v)
}

func decodeReservation(kv *mvccpb.KeyValue) (coord.Reservation, error) {
	var r reservationRecord
	err := decode(string(kv.Key), kv.Value, coord.KindReservation, coord.SchemaVersion, &r)
	return r.Reservation, err
}

// claimOwner decodes just the owner of a coord claim record, with coord's
// kind and version rule.
func claimOwner(kv *mvccpb.KeyValue) (coord.Owner, error) {
	var r struct {
		header
		Owner coord.Owner `json:"owner"`
	}
	err := decode(string(kv.Key), kv.Value, coord.KindClaim, coord.SchemaVersion, &r)
	return r.Owner, err
}

func encode(kind string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of strings, numbers and times are encoded.
		panic(fmt.Sprintf("catchup: encoding %s: %v", kind, err))
	}
	return string(b)
}

func hdr(kind string) header { return header{kind, SchemaVersion} }

var zeroTime time.Time
