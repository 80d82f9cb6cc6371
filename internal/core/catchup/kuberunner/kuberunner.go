// Package kuberunner adapts the Kubernetes Job runner (package kube) to
// catchup.Runner, the interface the catch-up controller drives.
//
// The two name Jobs differently: the controller knows a Job by its
// catch-up Job id (catchup.JobName(prefix, table, attempt)) and reads it
// back with Get by that id, while package kube names the Kubernetes Job
// from the exact (table, job id) pair. The adapter inverts the controller's
// name without any state of its own, so a restarted master resolves it
// exactly as the first did: the attempt is the id's suffix, and the table
// is the owned target whose catchup.JobName for that attempt is the id
// (only owned targets are ever admitted, and the policy — owned targets
// included — is persisted and identical on every master).
//
// JobRefs handed to the controller carry the Kubernetes name, UID and
// resourceVersion, so Terminate and PodsTerminal are package kube's
// guarded calls unchanged.
package kuberunner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/kube"
)

// Runner is a catchup.Runner over a kube.JobRunner.
type Runner struct {
	k      kube.JobRunner
	prefix string
	owned  []string
}

var _ catchup.Runner = (*Runner)(nil)

// New returns the adapter. prefix is the coord key prefix (what
// catchup.JobName hashes) and owned the policy's owned targets.
func New(k kube.JobRunner, prefix string, owned []string) *Runner {
	return &Runner{k: k, prefix: prefix, owned: append([]string(nil), owned...)}
}

// ExecutorEnv is the part of a JobSpec's environment that is the same for
// every Job of a policy (everything but the table and the Job id, which
// package kube sets itself): the master puts it in kube.Config.Env.
func ExecutorEnv(p catchup.Policy) map[string]string {
	env := catchup.JobSpec{SoftSlice: p.SoftSlice, BatchBytes: p.BatchBytes, BatchGenerations: p.BatchGenerations,
		MergeBufferBytes: p.MergeBufferBytes, CacheBytes: p.CacheBytes}.Env()
	delete(env, "WALCTL_CATCHUP_TABLE")
	delete(env, "WALCTL_CATCHUP_JOB")
	return env
}

// resolve maps a catch-up Job id onto package kube's spec.
func (r *Runner) resolve(jobID string) (kube.JobSpec, error) {
	i := strings.LastIndexByte(jobID, '-')
	attempt, err := strconv.Atoi(jobID[i+1:])
	if i < 0 || err != nil || attempt < 1 {
		return kube.JobSpec{}, fmt.Errorf("catch-up job %q: no attempt suffix: %w", jobID, catchup.ErrJobNotFound)
	}
	for _, t := range r.owned {
		if catchup.JobName(r.prefix, t, attempt) == jobID {
			return kube.JobSpec{Table: t, JobID: jobID}, nil
		}
	}
	return kube.JobSpec{}, fmt.Errorf("catch-up job %q is not a job of any owned target: %w", jobID, catchup.ErrJobNotFound)
}

// Create implements catchup.Runner with kube's idempotent, read-back
// reconciled create.
func (r *Runner) Create(ctx context.Context, spec catchup.JobSpec) (catchup.JobRef, error) {
	ref, err := r.k.Create(ctx, kube.JobSpec{Table: spec.Table, JobID: spec.JobID})
	if err != nil {
		return catchup.JobRef{}, mapErr(err)
	}
	return catchup.JobRef(ref), nil
}

// Get implements catchup.Runner: name is the catch-up Job id.
func (r *Runner) Get(ctx context.Context, name string) (catchup.JobStatus, error) {
	ks, err := r.resolve(name)
	if err != nil {
		return catchup.JobStatus{}, err
	}
	st, err := r.k.Get(ctx, kube.JobName(ks))
	if err != nil {
		return catchup.JobStatus{}, mapErr(err)
	}
	if st.JobID != "" && st.JobID != name {
		return catchup.JobStatus{}, fmt.Errorf("kubernetes job %s carries job id %q, not %q: %w", st.Ref.Name, st.JobID, name, catchup.ErrJobNotFound)
	}
	out := catchup.JobStatus{Ref: catchup.JobRef(st.Ref), State: catchup.JobActive}
	switch {
	case st.Outcome == kube.OutcomeSucceeded:
		out.State, out.Detail = catchup.JobSucceeded, "job complete"
	case st.Outcome == kube.OutcomeFailed:
		out.State, out.Detail = catchup.JobFailed, fmt.Sprintf("job failed (%d failed pods)", st.Failed)
	case st.Deleting:
		out.State, out.Detail = catchup.JobFailed, "job is being deleted"
	}
	return out, nil
}

// Terminate implements catchup.Runner with kube's UID- and
// resourceVersion-guarded, background-propagated delete.
func (r *Runner) Terminate(ctx context.Context, ref catchup.JobRef) error {
	return mapErr(r.k.Terminate(ctx, kube.JobRef(ref)))
}

// PodsTerminal implements catchup.Runner.
func (r *Runner) PodsTerminal(ctx context.Context, ref catchup.JobRef) (bool, error) {
	done, err := r.k.PodsTerminal(ctx, kube.JobRef(ref))
	return done, mapErr(err)
}

// mapErr turns kube's sentinels into the runner errors the controller
// branches on, keeping the cause.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kube.ErrStale):
		return fmt.Errorf("%w: %w", catchup.ErrJobPrecondition, err)
	case errors.Is(err, errs.ErrNotFound):
		return fmt.Errorf("%w: %w", catchup.ErrJobNotFound, err)
	}
	return err
}
