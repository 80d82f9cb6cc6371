package kube_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/kube"
)

func TestRealCreateFromTemplate(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	spec := catchup.JobSpec{Table: "Orders_EU", Name: "r41-a1"}
	ref, err := e.runner.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	job, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(job.UID) != ref.UID || job.ResourceVersion != ref.ResourceVersion || ref.Name != spec.Name {
		t.Errorf("ref %v, stored %s uid %s rv %s", ref, job.Name, job.UID, job.ResourceVersion)
	}
	s, ps := job.Spec, job.Spec.Template.Spec
	c := ps.Containers[0]
	switch {
	case s.BackoffLimit == nil || *s.BackoffLimit != 0:
		t.Errorf("backoffLimit %v, want 0", s.BackoffLimit)
	case s.ActiveDeadlineSeconds != nil || ps.ActiveDeadlineSeconds != nil:
		t.Errorf("active deadline %v / %v, want none", s.ActiveDeadlineSeconds, ps.ActiveDeadlineSeconds)
	case s.TTLSecondsAfterFinished != nil || s.PodFailurePolicy != nil:
		t.Error("ttl or pod failure policy set")
	case *s.Parallelism != 1 || *s.Completions != 1 || ps.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("parallelism %d completions %d restart %s", *s.Parallelism, *s.Completions, ps.RestartPolicy)
	case ps.PriorityClassName != "" || ps.PreemptionPolicy != nil:
		t.Errorf("priority %q / %v without configuration", ps.PriorityClassName, ps.PreemptionPolicy)
	case c.Image != "ghcr.io/walctl/walctl@sha256:0000000000000000000000000000000000000000000000000000000000000000":
		t.Errorf("image %q is not the template's", c.Image)
	case !reflect.DeepEqual(c.Args, []string{"catchup", "run", "--table", "Orders_EU", "--job", "r41-a1"}):
		t.Errorf("args %q", c.Args)
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().Cmp(resource.MustParse("1500m")) != 0 || req.Memory().Cmp(resource.MustParse("2Gi")) != 0 || !reflect.DeepEqual(req, lim) {
		t.Errorf("requests %v limits %v, want cpu 1500m memory 2Gi, equal", req, lim)
	}
	env := map[string]string{}
	for _, v := range c.Env {
		env[v.Name] = v.Value
	}
	if env[kube.EnvTable] != "Orders_EU" || env[kube.EnvJobID] != "r41-a1" || env["WALCTL_WAL"] != "wal:7070" {
		t.Errorf("env %v", env)
	}
	if job.Annotations[kube.AnnotationTable] != "Orders_EU" || job.Labels[kube.LabelManagedBy] != "walctl" {
		t.Errorf("identity %v %v", job.Labels, job.Annotations)
	}
	// The API server selects the Job's Pods by its UID; PodsTerminal relies on it.
	if job.Spec.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] != ref.UID ||
		job.Spec.Template.Labels["batch.kubernetes.io/controller-uid"] != ref.UID {
		t.Errorf("selector %v, template labels %v", job.Spec.Selector, job.Spec.Template.Labels)
	}

	// Creating again is adoption, not a second Job; another execution is another Job.
	// (Without a deadline of its own the call still carries one: the fault
	// transport fails the test for any request without.)
	again, err := e.runner.Create(context.Background(), spec)
	if err != nil || again.UID != ref.UID {
		t.Fatalf("repeat Create = %v, %v; want uid %s", again, err, ref.UID)
	}
	other, err := e.runner.Create(ctx, catchup.JobSpec{Table: "Orders_EU", Name: "r41-a2"})
	if err != nil || other.Name == ref.Name {
		t.Fatalf("next attempt = %v, %v", other, err)
	}
	if got := e.jobs(); len(got) != 2 {
		t.Errorf("jobs %v, want 2", got)
	}
	st, err := e.runner.Get(context.Background(), ref)
	if err != nil || st.Ref != ref || st.State != catchup.JobActive || len(st.Pods) != 0 {
		t.Errorf("Get = %+v, %v", st, err)
	}
	if _, err := e.runner.Get(ctx, catchup.JobRef{Name: "walctl-catchup-none"}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("Get of a missing Job = %v, want errs.ErrNotFound", err)
	}
	if _, err := e.runner.Get(ctx, catchup.JobRef{Name: ref.Name, UID: "another-uid"}); !errors.Is(err, catchup.ErrJobNotFound) {
		t.Errorf("Get of the name with another UID = %v, want catchup.ErrJobNotFound", err)
	}
}

func TestRealConcurrentCreatesMakeOneJob(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	spec := catchup.JobSpec{Table: "events", Name: "r9-a1"}
	runners := []*kube.Runner{e.runner, e.newRunner(), e.newRunner()} // three masters
	refs := make([]catchup.JobRef, 9)
	failures := make([]error, 9)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs[i], failures[i] = runners[i%3].Create(ctx, spec)
		}()
	}
	wg.Wait()
	for i := range refs {
		if failures[i] != nil || refs[i].UID != refs[0].UID {
			t.Errorf("Create %d = %v, %v; want uid %s", i, refs[i], failures[i], refs[0].UID)
		}
	}
	if got := e.jobs(); len(got) != 1 {
		t.Errorf("jobs %v, want exactly one", got)
	}
}

func TestRealPriorityClassNeverPreempts(t *testing.T) {
	ctx := testCtx(t)
	admin := apiserver.AdminClient()
	for name, policy := range map[string]corev1.PreemptionPolicy{"walctl-t-nopreempt": corev1.PreemptNever, "walctl-t-preempting": corev1.PreemptLowerPriority} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000, PreemptionPolicy: ptr.To(policy)}
		if _, err := admin.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for class, wantPod := range map[string]bool{"walctl-t-nopreempt": true, "walctl-t-preempting": false} {
		t.Run(class, func(t *testing.T) {
			e := newEnv(t, func(c *kube.Config) { c.PriorityClassName = class })
			ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "t", Name: "j1"})
			if err != nil {
				t.Fatal(err)
			}
			job, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ps := job.Spec.Template.Spec
			if ps.PriorityClassName != class || ps.PreemptionPolicy == nil || *ps.PreemptionPolicy != corev1.PreemptNever {
				t.Fatalf("pod template priority %q preemption %v", ps.PriorityClassName, ps.PreemptionPolicy)
			}
			// What the Job controller would do: create a Pod from the template.
			// A class that would preempt makes the Pod fail admission rather
			// than evict anything.
			_, err = e.admin.CoreV1().Pods(e.ns).Create(ctx, podOf(job, "p0"), metav1.CreateOptions{})
			if wantPod && err != nil {
				t.Fatalf("pod with a non-preempting class refused: %v", err)
			}
			if !wantPod && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PreemptionPolicy")) {
				t.Fatalf("pod with a preempting class: %v, want Forbidden by the Priority admission plugin", err)
			}
		})
	}
}
