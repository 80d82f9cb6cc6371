package kube

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/walctl/walctl/internal/core/catchup"
)

// Runner is the Kubernetes catchup.Runner. It needs exactly the permissions of
// the Role in deploy/rbac.yaml: get, create and delete Jobs and list Pods in
// its namespace.
type Runner struct {
	client kubernetes.Interface
	cfg    Config
	log    *slog.Logger
}

var _ catchup.Runner = (*Runner)(nil)

// NewRunner returns a Runner using client. It validates cfg (errors wrap
// errs.ErrInvalid) and makes no API call.
func NewRunner(client kubernetes.Interface, cfg Config, log *slog.Logger) (*Runner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{client: client, cfg: cfg, log: log}, nil
}

// NewRunnerForConfig is NewRunner with a client built from a rest.Config
// (in-cluster or kubeconfig; the command layer builds it).
func NewRunnerForConfig(rc *rest.Config, cfg Config, log *slog.Logger) (*Runner, error) {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewRunner(client, cfg, log)
}

// Build returns the Job that Create would submit for spec, for dry runs and
// review. Errors wrap errs.ErrInvalid.
func (r *Runner) Build(spec catchup.JobSpec) (*batchv1.Job, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	return r.cfg.buildJob(spec), nil
}

func (r *Runner) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.cfg.CallTimeout)
}

func (r *Runner) jobs() jobClient { return r.client.BatchV1().Jobs(r.cfg.Namespace) }

type jobClient interface {
	Create(context.Context, *batchv1.Job, metav1.CreateOptions) (*batchv1.Job, error)
	Get(context.Context, string, metav1.GetOptions) (*batchv1.Job, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// Create implements catchup.Runner. A create that fails ambiguously (transport
// error, timeout, 5xx: the request may have been applied) is reconciled by
// reading the deterministic name back: our Job is adopted, a missing one is
// created once more (a late arrival of the first request then meets
// AlreadyExists), someone else's is refused with ErrNotOurs. If the read-back
// is itself ambiguous, Create fails with ErrAmbiguous and the caller repeats
// it.
func (r *Runner) Create(ctx context.Context, spec catchup.JobSpec) (catchup.JobRef, error) {
	if err := validateSpec(spec); err != nil {
		return catchup.JobRef{}, err
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	want := r.cfg.buildJob(spec)
	log := r.log.With("job", want.Name, "table", spec.Table)

	const attempts = 2 // create, then (after a read-back found nothing) once more
	var lastErr error
	for i := 0; i < attempts; i++ {
		got, err := r.jobs().Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			log.InfoContext(ctx, "created catch-up job", "uid", got.UID)
			return refOf(got), nil
		}
		if !isAlreadyExists(err) && !isAmbiguous(err) {
			return catchup.JobRef{}, wrap(fmt.Sprintf("create job %s", want.Name), err)
		}
		if !isAlreadyExists(err) {
			log.WarnContext(ctx, "job create outcome unknown; reading back", "err", err)
		}
		lastErr = err
		ref, found, err := r.adopt(ctx, spec, want.Name)
		switch {
		case err != nil:
			return catchup.JobRef{}, err
		case found:
			log.InfoContext(ctx, "adopted existing catch-up job", "uid", ref.UID)
			return ref, nil
		}
	}
	return catchup.JobRef{}, fmt.Errorf("create job %s: %w: %w", want.Name, ErrAmbiguous, lastErr)
}

// adopt reads name back: (ref, true) when it is spec's Job, (_, false) when
// it does not exist.
func (r *Runner) adopt(ctx context.Context, spec catchup.JobSpec, name string) (catchup.JobRef, bool, error) {
	got, err := r.jobs().Get(ctx, name, metav1.GetOptions{})
	switch {
	case isNotFound(err):
		return catchup.JobRef{}, false, nil
	case err != nil && isAmbiguous(err):
		return catchup.JobRef{}, false, fmt.Errorf("read back job %s: %w: %w", name, ErrAmbiguous, err)
	case err != nil:
		return catchup.JobRef{}, false, wrap(fmt.Sprintf("read back job %s", name), err)
	case !isOurs(got.Labels, got.Annotations, spec):
		return catchup.JobRef{}, false, fmt.Errorf("job %s (uid %s) does not carry table %q job %q: %w",
			name, got.UID, spec.Table, spec.Name, ErrNotOurs)
	}
	return refOf(got), true, nil
}

// Get implements catchup.Runner: the Job named ref.Name, and with ref.UID
// set only that exact Job (another UID under the name is
// catchup.ErrJobNotFound). A Job whose deletion was accepted is JobFailed
// with Deleting set, unless it had finished.
func (r *Runner) Get(ctx context.Context, ref catchup.JobRef) (catchup.JobStatus, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	job, err := r.jobs().Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case isNotFound(err):
		return catchup.JobStatus{}, fmt.Errorf("get job %s: %w: %w", ref, catchup.ErrJobNotFound, err)
	case err != nil:
		return catchup.JobStatus{}, wrap(fmt.Sprintf("get job %s", ref.Name), err)
	case ref.UID != "" && string(job.UID) != ref.UID:
		return catchup.JobStatus{}, fmt.Errorf("job %s is now uid %s: the recorded job is gone: %w", ref, job.UID, catchup.ErrJobNotFound)
	}
	pods, err := r.pods(ctx, job.UID)
	if err != nil {
		return catchup.JobStatus{}, err
	}
	st := catchup.JobStatus{Ref: refOf(job), State: catchup.JobActive, Deleting: job.DeletionTimestamp != nil, Pods: []catchup.PodStatus{}}
	switch {
	case outcomeOf(job) == catchup.JobSucceeded:
		st.State, st.Detail, st.FinishedAt = catchup.JobSucceeded, "job complete", endedAt(job)
	case outcomeOf(job) == catchup.JobFailed:
		st.State, st.Detail, st.FinishedAt = catchup.JobFailed, fmt.Sprintf("job failed (%d failed pods)", job.Status.Failed), endedAt(job)
	case st.Deleting:
		st.State, st.Detail = catchup.JobFailed, "job is being deleted"
	}
	for _, p := range pods {
		st.Pods = append(st.Pods, catchup.PodStatus{
			Name: p.Name, UID: string(p.UID), Phase: string(p.Status.Phase),
			Terminal: podTerminal(&p), Deleting: p.DeletionTimestamp != nil,
		})
	}
	return st, nil
}

// Terminate implements catchup.Runner: a delete with UID and resourceVersion
// preconditions and background propagation (the only policy that removes
// the Job without waiting for a garbage collector). A precondition failure
// is ErrStale, unless the Job with ref's UID is already being deleted, which
// is success (a repeat of an earlier, perhaps ambiguous, Terminate).
func (r *Runner) Terminate(ctx context.Context, ref catchup.JobRef) error {
	if ref.Name == "" || ref.UID == "" || ref.ResourceVersion == "" {
		return fmt.Errorf("terminate job: incomplete reference %s: %w", ref, ErrBadRef)
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	uid, rv := types.UID(ref.UID), ref.ResourceVersion
	err := r.jobs().Delete(ctx, ref.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	switch {
	case err == nil:
		r.log.InfoContext(ctx, "terminated catch-up job", "job", ref.Name, "uid", ref.UID)
		return nil
	case isNotFound(err):
		return nil // already gone
	case !isConflict(err):
		return wrap(fmt.Sprintf("terminate job %s", ref), err)
	}
	cur, gerr := r.jobs().Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case isNotFound(gerr):
		return nil // deleted between the two calls
	case gerr == nil && string(cur.UID) == ref.UID && cur.DeletionTimestamp != nil:
		return nil // our Job, deletion already accepted
	case gerr == nil:
		return fmt.Errorf("terminate job %s: now uid %s, resourceVersion %s: %w", ref, cur.UID, cur.ResourceVersion, ErrStale)
	}
	return fmt.Errorf("terminate job %s: %w (and reading it back: %w)", ref, ErrStale, wrap("get", gerr))
}

// PodsTerminal implements catchup.Runner. Pods are found by the controller-uid
// label that the API server puts on every Job's Pod template, so Pods of a
// Job that was deleted (and of no other Job of the same name) are still
// found. While the Job with ref's UID exists, is not being deleted and has
// not finished, the answer is false even with no Pods: its controller may
// still start one.
func (r *Runner) PodsTerminal(ctx context.Context, ref catchup.JobRef) (bool, error) {
	if ref.Name == "" || ref.UID == "" {
		return false, fmt.Errorf("pods of job: incomplete reference %s: %w", ref, ErrBadRef)
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	job, err := r.jobs().Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case isNotFound(err):
	case err != nil:
		return false, wrap(fmt.Sprintf("get job %s", ref.Name), err)
	case string(job.UID) == ref.UID && job.DeletionTimestamp == nil && outcomeOf(job) == catchup.JobActive:
		return false, nil
	}
	pods, err := r.pods(ctx, types.UID(ref.UID))
	if err != nil {
		return false, err
	}
	for i := range pods {
		if !podTerminal(&pods[i]) {
			return false, nil
		}
	}
	return true, nil
}

func (r *Runner) pods(ctx context.Context, uid types.UID) ([]corev1.Pod, error) {
	sel := labels.Set{batchv1.ControllerUidLabel: string(uid)}.AsSelector().String()
	list, err := r.client.CoreV1().Pods(r.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, wrap(fmt.Sprintf("list pods of job uid %s", uid), err)
	}
	return list.Items, nil
}

func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// outcomeOf follows the Job's Complete/Failed condition.
func outcomeOf(job *batchv1.Job) catchup.JobState {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return catchup.JobSucceeded
		case batchv1.JobFailed:
			return catchup.JobFailed
		}
	}
	return catchup.JobActive
}

// endedAt is when the Job's Complete or Failed condition became true.
func endedAt(job *batchv1.Job) time.Time {
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func refOf(job *batchv1.Job) catchup.JobRef {
	return catchup.JobRef{Name: job.Name, UID: string(job.UID), ResourceVersion: job.ResourceVersion}
}
