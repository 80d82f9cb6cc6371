package catchup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
)

// Runner starts and stops catch-up executors (`walctl catchup run`): the
// Kubernetes Job runner in production, child processes on the embedded
// default, a fake in tests (package catchuptest). The controller calls it
// only from persisted intent, so every method may be called again after a
// failure or a master restart and must be idempotent by Job name.
type Runner interface {
	// Create starts the executor for spec unless a Job named spec.Name
	// already exists, and returns its identity either way. An ambiguous
	// create (timeout after the request was sent) is reconciled by reading
	// back by name, never by creating a second Job.
	Create(ctx context.Context, spec JobSpec) (JobRef, error)
	// Get reads the Job by name: its current identity (UID and
	// resourceVersion) and state. A missing Job is ErrJobNotFound.
	Get(ctx context.Context, name string) (JobStatus, error)
	// Terminate deletes (stops) the Job with UID and resourceVersion
	// preconditions and background propagation. A Job that is already gone
	// is ErrJobNotFound; a stale UID or resourceVersion is
	// ErrJobPrecondition (the caller re-reads with Get and retries; it
	// never retries without the preconditions).
	Terminate(ctx context.Context, ref JobRef) error
	// PodsTerminal reports whether every Pod (process) of the Job has
	// terminated; true when none exists. The fleet slot is released only
	// after it returns true.
	PodsTerminal(ctx context.Context, ref JobRef) (bool, error)
}

// Runner errors; adapters wrap them.
var (
	// ErrJobNotFound: no Job by that name (or with that UID).
	ErrJobNotFound = fmt.Errorf("catch-up job not found: %w", errs.ErrNotFound)
	// ErrJobPrecondition: the Job's UID or resourceVersion is not the
	// given one.
	ErrJobPrecondition = fmt.Errorf("catch-up job precondition failed: %w", errs.ErrConflict)
)

// JobState is the lifecycle state of a Job as its runner sees it.
type JobState string

// Job states.
const (
	JobActive    JobState = "active"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
)

// JobStatus is what Runner.Get reports.
type JobStatus struct {
	Ref   JobRef
	State JobState
	// Detail is the runner's reason for a failure (exit code, condition).
	Detail string
}

// JobSpec is everything a runner needs to start one executor. API callers
// never supply any of it: it comes from the policy and the reservation
// (rule 16); the runner adds the image, resources and command from its own
// reviewed template.
type JobSpec struct {
	// Name is the deterministic Job name, equal to the reservation's JobID.
	Name    string
	Table   string
	JobID   string
	Attempt int
	// Executor settings from the policy (§4).
	SoftSlice        time.Duration
	BatchBytes       int64
	BatchGenerations int
	MergeBufferBytes int64
	CacheBytes       int64
	// Labels identify the Job for selectors and humans.
	Labels map[string]string
}

// Args returns the executor's command-line arguments after `walctl`, for
// runners that build a command (local processes, Job templates).
func (s JobSpec) Args() []string {
	return []string{"catchup", "run", "--table", s.Table, "--job", s.JobID,
		fmt.Sprintf("--soft-slice=%s", s.SoftSlice),
		fmt.Sprintf("--batch-bytes=%d", s.BatchBytes),
		fmt.Sprintf("--batch-generations=%d", s.BatchGenerations),
		fmt.Sprintf("--merge-buffer-bytes=%d", s.MergeBufferBytes),
		fmt.Sprintf("--cache-bytes=%d", s.CacheBytes)}
}

// Env returns the executor's settings as environment variables (the
// WALCTL_* names `walctl catchup run` reads through its configuration), for
// runners that set env on a reviewed template instead of arguments.
func (s JobSpec) Env() map[string]string {
	return map[string]string{
		"WALCTL_CATCHUP_TABLE":              s.Table,
		"WALCTL_CATCHUP_JOB":                s.JobID,
		"WALCTL_CATCHUP_SOFT_SLICE":         s.SoftSlice.String(),
		"WALCTL_CATCHUP_BATCH_BYTES":        fmt.Sprint(s.BatchBytes),
		"WALCTL_CATCHUP_BATCH_GENERATIONS":  fmt.Sprint(s.BatchGenerations),
		"WALCTL_CATCHUP_MERGE_BUFFER_BYTES": fmt.Sprint(s.MergeBufferBytes),
		"WALCTL_CATCHUP_CACHE_BYTES":        fmt.Sprint(s.CacheBytes),
	}
}

// JobName is the deterministic Job identity of a table's attempt:
// "walctl-catchup-<table, lowercased, '_'→'-', at most 30 chars>-<8 hex of
// sha256(prefix/table)>-<attempt>". It is a valid Kubernetes name (RFC 1123
// label, ≤ 63 chars), distinct for distinct tables and prefixes, and the
// same on every master and after every restart, so a repeated create finds
// the existing Job.
func JobName(prefix, table string, attempt int) string {
	sum := sha256.Sum256([]byte(prefix + "/" + table))
	short := strings.Trim(strings.ReplaceAll(strings.ToLower(table), "_", "-"), "-")
	if len(short) > 30 {
		short = strings.TrimRight(short[:30], "-")
	}
	if short == "" {
		short = "t"
	}
	return fmt.Sprintf("walctl-catchup-%s-%s-%d", short, hex.EncodeToString(sum[:4]), attempt)
}

func (s *Store) jobSpec(p Policy, rec targetRecord) JobSpec {
	return JobSpec{
		Name: rec.JobID, Table: rec.Table, JobID: rec.JobID, Attempt: rec.Attempt,
		SoftSlice: p.SoftSlice, BatchBytes: p.BatchBytes, BatchGenerations: p.BatchGenerations,
		MergeBufferBytes: p.MergeBufferBytes, CacheBytes: p.CacheBytes,
		Labels: map[string]string{
			"app.kubernetes.io/name":       "walctl-catchup",
			"app.kubernetes.io/managed-by": "walctl-master",
			"walctl.io/attempt":            fmt.Sprint(rec.Attempt),
		},
	}
}
