package kube

// Control-flow tests with client-go's fake clientset. The fake ignores delete
// preconditions, has no UIDs or resourceVersions and no selector defaulting,
// so nothing here proves a safety rule; the real-apiserver tests
// (*_real_test.go) do.

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

var jobsGR = schema.GroupResource{Group: "batch", Resource: "jobs"}

func fakeRunner(t *testing.T, objs ...runtime.Object) (*Runner, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	r, err := NewRunner(cs, testConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, cs
}

func countVerb(cs *fake.Clientset, verb string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

func TestFakeCreateAdoptsOwnJob(t *testing.T) {
	spec := catchup.JobSpec{Table: "orders", Name: "r1-a1"}
	r, _ := fakeRunner(t)
	existing, _ := r.Build(spec)
	existing.UID = "uid-1"
	r, cs := fakeRunner(t, existing)
	ref, err := r.Create(context.Background(), spec)
	if err != nil || ref.UID != "uid-1" {
		t.Fatalf("Create = %v, %v; want adoption of uid-1", ref, err)
	}
	if n := countVerb(cs, "create"); n != 1 {
		t.Errorf("%d creates, want 1 (then a read-back)", n)
	}
}

func TestFakeCreateRefusesForeignJobUnderOurName(t *testing.T) {
	spec := catchup.JobSpec{Table: "orders", Name: "r1-a1"}
	r, _ := fakeRunner(t)
	foreign, _ := r.Build(spec)
	foreign.Annotations[AnnotationJobID] = "r1-a0"
	r, _ = fakeRunner(t, foreign)
	_, err := r.Create(context.Background(), spec)
	if !errors.Is(err, ErrNotOurs) || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("got %v, want ErrNotOurs (errs.ErrConflict)", err)
	}
}

func TestFakeCreateDefiniteRejectionIsNotReadBack(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want error
	}{
		"forbidden": {apierrors.NewForbidden(jobsGR, "x", errors.New("rbac")), ErrForbidden},
		"invalid":   {apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x", nil), errs.ErrInvalid},
		"no ns":     {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "walctl"), errs.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			r, cs := fakeRunner(t)
			cs.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			_, err := r.Create(context.Background(), catchup.JobSpec{Table: "t", Name: "j"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if n := countVerb(cs, "get"); n != 0 {
				t.Errorf("%d read-backs after a definite rejection", n)
			}
		})
	}
}

func TestFakeCreateAmbiguousTwiceIsAmbiguous(t *testing.T) {
	r, cs := fakeRunner(t)
	reset := &netErr{syscall.ECONNRESET}
	cs.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, reset })
	ref, err := r.Create(context.Background(), catchup.JobSpec{Table: "t", Name: "j"})
	if !errors.Is(err, ErrAmbiguous) || !errors.Is(err, errs.ErrUnavailable) || ref != (catchup.JobRef{}) {
		t.Fatalf("got %v, %v; want ErrAmbiguous (errs.ErrUnavailable)", ref, err)
	}
	if c, g := countVerb(cs, "create"), countVerb(cs, "get"); c != 2 || g != 2 {
		t.Errorf("creates %d, gets %d; want 2 and 2 (create, read back, create, read back)", c, g)
	}
	cs.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd")
	})
	if _, err := r.Create(context.Background(), catchup.JobSpec{Table: "t", Name: "j"}); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("failed read-back: got %v, want ErrAmbiguous", err)
	}
}

type netErr struct{ errno syscall.Errno }

func (e *netErr) Error() string { return "write tcp: " + e.errno.Error() }
func (e *netErr) Unwrap() error { return e.errno }

func TestWrapCategories(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{apierrors.NewNotFound(jobsGR, "x"), errs.ErrNotFound},
		{apierrors.NewAlreadyExists(jobsGR, "x"), errs.ErrConflict},
		{apierrors.NewConflict(jobsGR, "x", errors.New("uid")), errs.ErrConflict},
		{apierrors.NewBadRequest("x"), errs.ErrInvalid},
		{apierrors.NewForbidden(jobsGR, "x", errors.New("x")), ErrForbidden},
		{apierrors.NewUnauthorized("x"), ErrForbidden},
		{apierrors.NewTooManyRequests("x", 1), errs.ErrUnavailable},
		{apierrors.NewInternalError(errors.New("x")), errs.ErrUnavailable},
		{apierrors.NewTimeoutError("x", 1), errs.ErrUnavailable},
		{apierrors.NewGenericServerResponse(http.StatusGatewayTimeout, "POST", jobsGR, "x", "", 0, true), errs.ErrUnavailable},
		{context.DeadlineExceeded, errs.ErrUnavailable},
		{&netErr{syscall.ECONNREFUSED}, errs.ErrUnavailable},
	}
	for _, tc := range cases {
		got := wrap("op", tc.err)
		if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("wrap(%v) = %v; want %v and the original", tc.err, got, tc.want)
		}
	}
	if !errors.Is(wrap("op", context.Canceled), context.Canceled) {
		t.Error("cancellation lost")
	}
}

func TestEveryCallIsBounded(t *testing.T) {
	r, _ := fakeRunner(t)
	ctx, cancel := r.bound(context.Background())
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > DefaultCallTimeout {
		t.Errorf("unbounded ctx got deadline %v, %v; want within %s", d, ok, DefaultCallTimeout)
	}
	short, c2 := context.WithTimeout(context.Background(), time.Second)
	defer c2()
	ctx, cancel = r.bound(short)
	defer cancel()
	if d, _ := ctx.Deadline(); time.Until(d) > time.Second {
		t.Error("caller's shorter deadline not kept")
	}
}

func TestTerminateNeedsAFullReference(t *testing.T) {
	r, cs := fakeRunner(t)
	for _, ref := range []catchup.JobRef{{}, {Name: "x", UID: "u"}, {Name: "x", ResourceVersion: "1"}, {UID: "u", ResourceVersion: "1"}} {
		if err := r.Terminate(context.Background(), ref); !errors.Is(err, ErrBadRef) {
			t.Errorf("Terminate(%v) = %v, want ErrBadRef", ref, err)
		}
	}
	if _, err := r.PodsTerminal(context.Background(), catchup.JobRef{Name: "x"}); !errors.Is(err, ErrBadRef) {
		t.Errorf("PodsTerminal without UID = %v, want ErrBadRef", err)
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d API calls for invalid references", n)
	}
}

func TestOutcome(t *testing.T) {
	j := &batchv1.Job{}
	if outcomeOf(j) != catchup.JobActive {
		t.Error("no conditions")
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: "False"}, {Type: batchv1.JobComplete, Status: "True"}}
	if outcomeOf(j) != catchup.JobSucceeded {
		t.Error("complete")
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: "True"}}
	if outcomeOf(j) != catchup.JobFailed {
		t.Error("failed")
	}
}
