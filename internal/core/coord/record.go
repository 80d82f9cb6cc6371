package coord

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/walctl/walctl/internal/core/errs"
)

// Record kinds and the schema version this binary writes and understands
// (DESIGN.md §3 rule 16's last sentence: a record of an unknown kind or a
// newer schema version fails closed).
const (
	KindClaim       = "claim"
	KindReservation = "reservation"
	KindAudit       = "audit"
	SchemaVersion   = 1
)

// Owner identifies a claim holder.
type Owner struct {
	// ID is unique per holder process and claim attempt, e.g. host/pid/uuid.
	ID string `json:"id"`
	// Kind is OwnerWorker, OwnerCatchup or OwnerCLI.
	Kind string `json:"kind"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// JobID is the catch-up Job identity; required for OwnerCatchup, which
	// may claim only a table reserved for exactly this Job.
	JobID string `json:"job_id,omitempty"`
}

// Owner kinds.
const (
	OwnerWorker  = "worker"
	OwnerCatchup = "catchup"
	OwnerCLI     = "cli"
)

func (o Owner) validate() error {
	if o.ID == "" {
		return fmt.Errorf("claim owner has no id: %w", errs.ErrInvalid)
	}
	switch o.Kind {
	case OwnerWorker, OwnerCLI:
	case OwnerCatchup:
		if o.JobID == "" {
			return fmt.Errorf("catch-up claim owner %q has no job id: %w", o.ID, errs.ErrInvalid)
		}
	default:
		return fmt.Errorf("claim owner kind %q is not one of worker, catchup, cli: %w", o.Kind, errs.ErrInvalid)
	}
	return nil
}

// String renders the owner for messages, e.g. "worker w-1 (host a, pid 7)".
func (o Owner) String() string {
	s := o.Kind + " " + o.ID
	if o.Host != "" || o.PID != 0 {
		s += fmt.Sprintf(" (host %s, pid %d)", o.Host, o.PID)
	}
	if o.JobID != "" {
		s += " job " + o.JobID
	}
	return s
}

// SlicePolicy bounds how long a holder keeps a claim (DESIGN.md §2 "claim":
// a worker holds a table for a bounded slice, then releases it). Zero fields
// are unbounded.
type SlicePolicy struct {
	MaxRounds   int           `json:"max_rounds,omitempty"`
	MaxDuration time.Duration `json:"max_duration_ns,omitempty"`
}

// header is common to every record.
type header struct {
	Kind          string `json:"kind"`
	SchemaVersion int    `json:"schema_version"`
}

// claimRecord is the value of <prefix>/claims/<table>.
type claimRecord struct {
	header
	Table      string      `json:"table"`
	Owner      Owner       `json:"owner"`
	LeaseID    int64       `json:"lease_id"`
	TTLSeconds int64       `json:"ttl_seconds"`
	AcquiredAt time.Time   `json:"acquired_at"`
	Slice      SlicePolicy `json:"slice"`
	// Epoch is the publisher epoch this holder fenced with; 0 until fenced.
	Epoch uint64 `json:"epoch"`
}

// Reservation is the master's catch-up reservation of a table (issue 7
// writes it; coord reads it to exclude ordinary claims and to admit the
// reserved Job's executor). Unknown fields are ignored within a schema
// version.
type Reservation struct {
	Table string `json:"table"`
	JobID string `json:"job_id"`
}

type reservationRecord struct {
	header
	Reservation
}

// MarshalReservation encodes a reservation record, for the master and tests.
func MarshalReservation(r Reservation) ([]byte, error) {
	return json.Marshal(reservationRecord{header{KindReservation, SchemaVersion}, r})
}

// AuditRecord is the value of <prefix>/audit/<time>-<table>.
type AuditRecord struct {
	Action string    `json:"action"`
	Table  string    `json:"table"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// Claim is the revoked claim as it was.
	Claim ClaimInfo `json:"claim"`
	// Stop is the storage stop a resume-table lifted, as it was.
	Stop *StopRecord `json:"stop,omitempty"`
}

type auditRecord struct {
	header
	AuditRecord
}

// decodeRecord checks kind and schema version before decoding, so a record
// written by a newer binary or of another kind fails closed, naming the key.
func decodeRecord(key string, data []byte, kind string, v any) error {
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("etcd key %s: unparsable record: %v: %w", key, err, errs.ErrCorrupt)
	}
	if h.Kind != kind {
		return fmt.Errorf("etcd key %s: record kind %q, want %q: %w", key, h.Kind, kind, ErrUnknownRecord)
	}
	if h.SchemaVersion < 1 || h.SchemaVersion > SchemaVersion {
		return fmt.Errorf("etcd key %s: %s record schema version %d, this binary knows 1..%d: %w",
			key, kind, h.SchemaVersion, SchemaVersion, ErrUnknownRecord)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("etcd key %s: unparsable %s record: %v: %w", key, kind, err, errs.ErrCorrupt)
	}
	return nil
}

func decodeClaim(key string, data []byte) (claimRecord, error) {
	var r claimRecord
	err := decodeRecord(key, data, KindClaim, &r)
	return r, err
}

func decodeReservation(key string, data []byte) (Reservation, error) {
	var r reservationRecord
	err := decodeRecord(key, data, KindReservation, &r)
	return r.Reservation, err
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of strings, numbers and times are encoded.
		panic(fmt.Sprintf("coord: encoding %T: %v", v, err))
	}
	return string(b)
}

func nopLogger() *zap.Logger { return zap.NewNop() }
