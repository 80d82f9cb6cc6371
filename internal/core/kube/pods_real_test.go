package kube_test

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/walctl/walctl/internal/core/catchup"
)

// podOf is the Pod the Job controller would create for job. No
// controller-manager runs in these tests, so they create Pods themselves.
func podOf(job *batchv1.Job, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: job.Namespace,
			Labels: job.Spec.Template.Labels, Annotations: job.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true),
			}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
}

func (e *env) createPod(job *batchv1.Job, name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.admin.CoreV1().Pods(e.ns).Create(testCtx(e.t), podOf(job, name), createOpts)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// setPhase moves a Pod to phase through the status subresource, as a kubelet
// would.
func (e *env) setPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	e.t.Helper()
	ctx := testCtx(e.t)
	cur, err := e.admin.CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cur.Status.Phase = phase
	out, err := e.admin.CoreV1().Pods(e.ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatalf("pod %s -> %s: %v", p.Name, phase, err)
	}
	return out
}

func (e *env) podsTerminal(ref catchup.JobRef) bool {
	e.t.Helper()
	ok, err := e.runner.PodsTerminal(testCtx(e.t), ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

// A Job's slot is held until every one of its Pods is terminal — also after
// the Job itself is gone, since deleting a Job does not stop its Pods.
func TestRealSlotHeldUntilEveryPodIsTerminal(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "r8-a1"})
	if err != nil {
		t.Fatal(err)
	}
	if e.podsTerminal(ref) {
		t.Fatal("a live Job without Pods yet releases its slot: its controller may still start one")
	}
	job, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := e.createPod(job, "exec-a"), e.createPod(job, "exec-b")
	e.setPhase(a, corev1.PodRunning)
	e.setPhase(b, corev1.PodRunning)

	// A Pod of another Job is not ours, however it looks.
	otherRef, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "r8-a0"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, otherRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.setPhase(e.createPod(other, "other-x"), corev1.PodRunning)

	st, err := e.runner.Get(ctx, ref)
	if err != nil || len(st.Pods) != 2 || st.Pods[0].Terminal || st.Pods[1].Terminal || st.Pods[0].Phase != "Running" {
		t.Fatalf("Get = %+v, %v; want two running Pods", st, err)
	}
	if e.podsTerminal(ref) {
		t.Fatal("running Pods, yet terminal")
	}
	if err := e.runner.Terminate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	e.gone(ctx, ref.Name)
	if e.podsTerminal(ref) {
		t.Fatal("Job deleted but its Pods still run: the slot must stay held")
	}
	e.setPhase(a, corev1.PodSucceeded)
	if e.podsTerminal(ref) {
		t.Fatal("one Pod still running")
	}
	e.setPhase(b, corev1.PodFailed)
	if !e.podsTerminal(ref) {
		t.Fatal("every Pod terminal, slot still held")
	}
	if e.podsTerminal(otherRef) {
		t.Fatal("the other Job's running Pod does not hold its slot")
	}
}

// A Pod that is being deleted but still runs holds the slot; so does a live
// Job whose Pods have all stopped, since its controller may start another.
func TestRealDeletingPodHoldsTheSlot(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "r9-a1"})
	if err != nil {
		t.Fatal(err)
	}
	job, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := podOf(job, "exec-a")
	p.Finalizers = []string{"walctl.dev/test-hold"} // as the Job controller's tracking finalizer would
	p, err = e.admin.CoreV1().Pods(e.ns).Create(ctx, p, createOpts)
	if err != nil {
		t.Fatal(err)
	}
	p = e.setPhase(p, corev1.PodRunning)
	if err := e.admin.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Terminate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	st, err := e.admin.CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil || st.DeletionTimestamp == nil || st.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod %v, %v: want deleting and running", st, err)
	}
	if e.podsTerminal(ref) {
		t.Fatal("a deleting Pod that still runs released the slot")
	}
	e.setPhase(p, corev1.PodFailed)
	if !e.podsTerminal(ref) {
		t.Fatal("pod failed, slot still held")
	}

	// A live, unfinished Job whose only Pod stopped: not yet.
	ref2, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "r9-a2"})
	if err != nil {
		t.Fatal(err)
	}
	job2, _ := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref2.Name, metav1.GetOptions{})
	e.setPhase(e.createPod(job2, "exec-b"), corev1.PodFailed)
	if e.podsTerminal(ref2) {
		t.Fatal("live Job without a Failed/Complete condition released its slot")
	}
}
