// Package kube runs walctl's catch-up executors as Kubernetes batch/v1 Jobs
// (DESIGN.md §3 rule 16). Runner implements catchup.Runner directly, in the
// catch-up package's vocabulary (JobSpec, JobRef, JobStatus), as the
// local-process runner of the embedded default does.
//
// The safety rules live here, not in the controller:
//
//   - The Job's name is the spec's deterministic name (catchup.JobName), so a
//     retried or ambiguous create can never produce a second Job: it meets
//     the first one by name, and the runner adopts it only if its labels and
//     annotations say it is the same execution. A Job is observed by the
//     identity the caller recorded (name and UID), never by configuration.
//   - The Job is built from a reviewed template file (see Template). Callers
//     supply a table and a Job name, never a Pod spec, image or command.
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
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// validateSpec checks what this runner needs of a spec; errors wrap
// errs.ErrInvalid.
func validateSpec(s catchup.JobSpec) error {
	if err := validateTable(s.Table); err != nil {
		return err
	}
	return validateName(s.Name)
}

// Errors, each wrapping the errs category the command layer maps to an exit
// code.
var (
	// ErrStale refuses to terminate an execution that was replaced (another
	// UID under the same name) or changed (another resourceVersion) since the
	// caller observed it. It is a catchup.ErrJobPrecondition.
	ErrStale = fmt.Errorf("job changed since it was observed: %w", catchup.ErrJobPrecondition)
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
