// Package kube runs walctl's catch-up executors as Kubernetes batch/v1 Jobs
// (DESIGN.md §3 rule 16). The catch-up controller talks to it through
// JobRunner, a small interface that a local-process runner (the embedded
// default) can satisfy as well.
//
// The safety rules live here, not in the controller:
//
//   - Job names are a pure function of (table, job id), so a retried or
//     ambiguous create can never produce a second Job: it meets the first one
//     by name, and the runner adopts it only if its labels and annotations
//     say it is the same execution.
//   - The Job is built from a reviewed template file (see Template). Callers
//     supply a table and a job id, never a Pod spec, image or command.
//   - Termination is a delete with UID and resourceVersion preconditions and
//     background propagation: a Job that was replaced or changed since the
//     caller observed it is never deleted by mistake.
//   - A Job's fleet slot may be released only when PodsTerminal says every
//     Pod of it is terminal.
//
// Every call is bounded: a ctx without a deadline gets Config.CallTimeout.
// Errors wrap the categories of internal/core/errs; a cancelled or timed-out
// call fails with an error wrapping errs.ErrUnavailable and ctx.Err(), and
// what that means for the outcome is said per method (only Create and
// Terminate write, and both may simply be repeated).
package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/walctl/walctl/internal/core/errs"
)

// JobRunner starts, observes and terminates catch-up executions. One
// execution is one `walctl catchup run --table T --job ID` process.
//
// Implementations must be idempotent under retries: Create with the same
// JobSpec returns the same JobRef, Terminate of an already terminated
// execution succeeds, so the controller can repeat any call after an
// ambiguous outcome (a timeout, a lost response, a master restart) instead of
// guessing what happened.
type JobRunner interface {
	// Create starts the execution described by spec, or adopts it if it
	// already exists (created by an earlier, possibly ambiguous, attempt).
	// It never starts a second execution for the same spec. If another
	// execution already holds the deterministic name it fails with an error
	// wrapping errs.ErrConflict. If the outcome cannot be determined before
	// ctx ends it fails with an error wrapping ErrAmbiguous (and
	// errs.ErrUnavailable); the caller must call Create again with the same
	// spec before doing anything else with the slot.
	Create(ctx context.Context, spec JobSpec) (JobRef, error)
	// Get observes the execution named name: its identity, counts and Pods.
	// A missing execution fails with an error wrapping errs.ErrNotFound. Get
	// has no side effects, so it is safe to repeat after cancellation.
	Get(ctx context.Context, name string) (JobStatus, error)
	// Terminate stops exactly the execution ref names: it is refused with an
	// error wrapping ErrStale (errs.ErrConflict) when the execution now has
	// another UID or resourceVersion, and succeeds when it is already gone or
	// already being deleted. After a cancelled or failed call the intent is
	// the caller's to persist and retry; retrying is always safe.
	Terminate(ctx context.Context, ref JobRef) error
	// PodsTerminal reports whether every Pod of the execution ref names has
	// stopped (succeeded or failed) and no new one can start, which is when
	// the caller may release the execution's resources. It is read-only.
	PodsTerminal(ctx context.Context, ref JobRef) (bool, error)
}

// JobSpec is everything a caller may say about an execution. Pod specs,
// images, commands and resources come from the reviewed template and the
// runner's configuration only.
type JobSpec struct {
	// Table is the table to catch up; it must be a valid walctl table name.
	Table string
	// JobID is the execution's identity, unique per attempt (the controller
	// derives it from the reservation and the attempt number). The executor
	// claims the table with exactly this identity.
	JobID string
}

// Validate checks the spec; errors wrap errs.ErrInvalid.
func (s JobSpec) Validate() error {
	if err := validateTable(s.Table); err != nil {
		return err
	}
	return validateJobID(s.JobID)
}

// JobRef identifies one execution exactly: a Job that was deleted and
// recreated under the same name has another UID, and a Job that changed since
// it was observed has another ResourceVersion.
type JobRef struct {
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resource_version"`
}

// String renders the reference for logs and errors.
func (r JobRef) String() string {
	return fmt.Sprintf("%s (uid %s, resourceVersion %s)", r.Name, r.UID, r.ResourceVersion)
}

// Outcome is how an execution ended, or OutcomeRunning while it has not.
type Outcome string

// Outcomes.
const (
	OutcomeRunning   Outcome = "running"
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
)

// JobStatus is one observation of an execution.
type JobStatus struct {
	Ref   JobRef `json:"ref"`
	Table string `json:"table"`
	JobID string `json:"job_id"`
	// Active, Succeeded and Failed count Pods as the Job reports them.
	Active    int32 `json:"active"`
	Succeeded int32 `json:"succeeded"`
	Failed    int32 `json:"failed"`
	// Outcome follows the Job's Complete/Failed condition.
	Outcome Outcome `json:"outcome"`
	// Deleting is true once a deletion of the Job has been accepted.
	Deleting bool `json:"deleting"`
	// Pods are the Pods the Job's selector matches.
	Pods []PodStatus `json:"pods"`
}

// PodStatus is one Pod of an execution.
type PodStatus struct {
	Name  string `json:"name"`
	UID   string `json:"uid"`
	Phase string `json:"phase"`
	// Terminal is true when the Pod has succeeded or failed: its containers
	// have stopped and will not be restarted.
	Terminal bool `json:"terminal"`
	// Deleting is true once a deletion of the Pod has been accepted; a
	// deleting Pod that is not Terminal still holds its resources.
	Deleting bool `json:"deleting"`
}

// Errors, each wrapping the errs category the command layer maps to an exit
// code.
var (
	// ErrStale refuses to terminate an execution that was replaced (another
	// UID under the same name) or changed (another resourceVersion) since the
	// caller observed it.
	ErrStale = fmt.Errorf("job changed since it was observed: %w", errs.ErrConflict)
	// ErrNotOurs refuses to adopt a Job that holds the deterministic name but
	// does not carry this execution's identity.
	ErrNotOurs = fmt.Errorf("job name is held by another execution: %w", errs.ErrConflict)
	// ErrAmbiguous marks a create whose outcome is unknown: the request may
	// or may not have reached the API server. Call Create again.
	ErrAmbiguous = fmt.Errorf("job creation outcome unknown: %w", errs.ErrUnavailable)
	// ErrForbidden marks a request the API server refused to authorize: the
	// master's Role (deploy/rbac.yaml) is missing or was changed. Retrying
	// does not help; it is a configuration error.
	ErrForbidden = fmt.Errorf("kubernetes API refused the request (check the master's Role): %w", errs.ErrInvalid)
	// ErrBadRef refuses a JobRef without a name, UID or resourceVersion: an
	// unguarded delete could remove a Job the caller never observed.
	ErrBadRef = fmt.Errorf("job reference needs name, uid and resourceVersion: %w", errs.ErrInvalid)
	// ErrBadTemplate marks a Job template that fails review (see Template).
	ErrBadTemplate = fmt.Errorf("job template rejected: %w", errs.ErrInvalid)
)

// wrap maps a client-go error onto walctl's categories, keeping the original
// (apierrors.IsX and errors.Is(err, context.Canceled) still work):
//
//	404                              errs.ErrNotFound
//	409 (conflict, already exists)   errs.ErrConflict
//	400, 405, 406, 413, 415, 422     errs.ErrInvalid
//	401, 403                         ErrForbidden (errs.ErrInvalid)
//	anything else                    errs.ErrUnavailable: transport errors,
//	                                 timeouts, cancellation, 429, 5xx
func wrap(op string, err error) error {
	var cat error
	switch code := statusCode(err); {
	case code == http.StatusNotFound:
		cat = errs.ErrNotFound
	case code == http.StatusConflict:
		cat = errs.ErrConflict
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		cat = ErrForbidden
	case isRejected(code):
		cat = errs.ErrInvalid
	default:
		cat = errs.ErrUnavailable
	}
	return fmt.Errorf("%s: %w: %w", op, cat, err)
}

// statusCode is the HTTP status of an API error, or 0 when err did not come
// from the API server (transport errors, cancellation).
func statusCode(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return 0
}

// isRejected reports a status with which the API server refuses a request
// before acting on it.
func isRejected(code int) bool {
	switch code {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusGone,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// isAmbiguous reports whether a failed write may nevertheless have been
// applied. Only a status with which the server refuses a request before
// acting on it (4xx other than 408 and 429) is definite; transport errors,
// cancellation, timeouts, throttling and 5xx may all follow a write that
// reached storage, so they are reconciled by reading back. Treating a
// definite failure as ambiguous only costs a read.
func isAmbiguous(err error) bool {
	switch code := statusCode(err); {
	case code == http.StatusUnauthorized, code == http.StatusForbidden, code == http.StatusNotFound,
		code == http.StatusConflict, isRejected(code):
		return false
	}
	return true
}

func isNotFound(err error) bool      { return err != nil && statusCode(err) == http.StatusNotFound }
func isAlreadyExists(err error) bool { return err != nil && apierrors.IsAlreadyExists(err) }
func isConflict(err error) bool      { return err != nil && apierrors.IsConflict(err) }
