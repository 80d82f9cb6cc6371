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

// Runner starts, observes and stops catch-up executors (`walctl catchup
// run`): package kube's Job runner in production, child processes on the
// embedded default (package localrunner), a fake in tests (package
// catchuptest). It is the one vocabulary of a catch-up Job: the controller
// records the JobRef that Create returns in the table's etcd record and
// thereafter finds the Job only by that identity, never by re-deriving it
// from configuration. The controller calls it only from persisted intent,
// so every method may be called again after a failure or a master restart
// and must be idempotent by Job name.
type Runner interface {
	// Create starts the executor for spec unless a Job named spec.Name
	// already exists for the same table and name, and returns its identity
	// either way. An ambiguous create (timeout after the request was sent)
	// is reconciled by reading back by name, never by creating a second
	// Job; a name held by another execution is errs.ErrConflict.
	Create(ctx context.Context, spec JobSpec) (JobRef, error)
	// Get observes the Job ref names. With ref.UID set it is exactly that
	// Job: none under the name, or one with another UID, is ErrJobNotFound.
	// With an empty UID (the identity is not recorded yet: a create intent
	// whose outcome is unknown) it is whichever Job holds the name. Get has
	// no side effects.
	Get(ctx context.Context, ref JobRef) (JobStatus, error)
	// Terminate stops exactly the Job ref names, with UID and
	// resourceVersion preconditions and background propagation. A Job that
	// is already gone (or already being deleted) is success or
	// ErrJobNotFound; a stale UID or resourceVersion is ErrJobPrecondition
	// (the caller re-reads with Get and retries; it never retries without
	// the preconditions).
	Terminate(ctx context.Context, ref JobRef) error
	// PodsTerminal reports whether every Pod (process) of the Job with
	// ref's UID has terminated and no new one can start; true when none
	// exists and the Job is gone or finished. The fleet slot is released
	// only after it returns true (rule 16).
	PodsTerminal(ctx context.Context, ref JobRef) (bool, error)
}

// Runner errors; runners wrap them (with their own detail).
var (
	// ErrJobNotFound: no Job by that name (or with that UID).
	ErrJobNotFound = fmt.Errorf("catch-up job not found: %w", errs.ErrNotFound)
	// ErrJobPrecondition: the Job's UID or resourceVersion is not the
	// given one.
	ErrJobPrecondition = fmt.Errorf("catch-up job precondition failed: %w", errs.ErrConflict)
)

// JobRef identifies one created Job (or local process) exactly: a Job that
// was deleted and recreated under the same name has another UID, and a Job
// that changed since it was observed has another ResourceVersion (the
// preconditions of its termination). It is persisted in the table's record.
type JobRef struct {
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resource_version"`
}

// String renders the reference for logs and errors.
func (r JobRef) String() string {
	return fmt.Sprintf("%s (uid %s, resourceVersion %s)", r.Name, r.UID, r.ResourceVersion)
}

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
	Ref   JobRef   `json:"ref"`
	State JobState `json:"state"`
	// Detail is the runner's reason for a failure (exit code, condition).
	Detail string `json:"detail,omitempty"`
	// FinishedAt is when a Job that ended by itself ended (zero while it
	// runs, or when the runner cannot tell).
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Deleting is true once a deletion of the Job has been accepted (its
	// State is then JobFailed unless it had finished).
	Deleting bool `json:"deleting"`
	// Pods are the Job's Pods (processes) as the runner sees them.
	Pods []PodStatus `json:"pods"`
}

// PodStatus is one Pod (process) of a Job.
type PodStatus struct {
	Name  string `json:"name"`
	UID   string `json:"uid"`
	Phase string `json:"phase"`
	// Terminal is true when the Pod has succeeded or failed: its
	// containers have stopped and will not be restarted.
	Terminal bool `json:"terminal"`
	// Deleting is true once a deletion of the Pod has been accepted; a
	// deleting Pod that is not Terminal still holds its resources.
	Deleting bool `json:"deleting"`
}

// JobSpec is everything a runner needs to start one executor. API callers
// never supply any of it: it comes from the policy and the table's record
// (rule 16); the runner adds the image, resources and command from its own
// reviewed template.
type JobSpec struct {
	// Name is the Job's deterministic identity (JobName): the runner's Job
	// name and the identity the executor claims the table with.
	Name    string
	Table   string
	Attempt int
	// Executor settings from the policy (§4).
	SoftSlice        time.Duration
	BatchBytes       int64
	BatchGenerations int
	MergeBufferBytes int64
	CacheBytes       int64
}

// Args returns the executor's command-line arguments after `walctl`, for
// runners that build a command (local processes).
func (s JobSpec) Args() []string {
	return []string{"catchup", "run", "--table", s.Table, "--job", s.Name,
		fmt.Sprintf("--soft-slice=%s", s.SoftSlice),
		fmt.Sprintf("--batch-bytes=%d", s.BatchBytes),
		fmt.Sprintf("--batch-generations=%d", s.BatchGenerations),
		fmt.Sprintf("--merge-buffer-bytes=%d", s.MergeBufferBytes),
		fmt.Sprintf("--cache-bytes=%d", s.CacheBytes)}
}

// ExecutorEnv returns the policy's executor settings as the WALCTL_CATCHUP_*
// environment `walctl catchup run` reads, for runners that set env on a
// reviewed template instead of arguments (the table and the Job name are
// the runner's to set).
func (p Policy) ExecutorEnv() map[string]string {
	return map[string]string{
		"WALCTL_CATCHUP_SOFT_SLICE":         p.SoftSlice.String(),
		"WALCTL_CATCHUP_BATCH_BYTES":        fmt.Sprint(p.BatchBytes),
		"WALCTL_CATCHUP_BATCH_GENERATIONS":  fmt.Sprint(p.BatchGenerations),
		"WALCTL_CATCHUP_MERGE_BUFFER_BYTES": fmt.Sprint(p.MergeBufferBytes),
		"WALCTL_CATCHUP_CACHE_BYTES":        fmt.Sprint(p.CacheBytes),
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

// jobSpec is the spec of rec's Job: its identity from the record, its
// settings from the policy.
func (s *Store) jobSpec(p Policy, rec targetRecord) JobSpec {
	return JobSpec{
		Name: rec.JobID, Table: rec.Table, Attempt: rec.Attempt,
		SoftSlice: p.SoftSlice, BatchBytes: p.BatchBytes, BatchGenerations: p.BatchGenerations,
		MergeBufferBytes: p.MergeBufferBytes, CacheBytes: p.CacheBytes,
	}
}
