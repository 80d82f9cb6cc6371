package kube_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/kube"
)

var createOpts = metav1.CreateOptions{}

// gone asserts that the Job no longer exists. No controller-manager runs, so
// only a delete with background propagation removes a Job at once: an
// orphaning or foreground delete would leave it behind with a finalizer.
func (e *env) gone(ctx context.Context, name string) {
	e.t.Helper()
	j, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		e.t.Fatalf("job %s still there (finalizers %v, deleting %v): %v", name, j.Finalizers, j.DeletionTimestamp, err)
	}
	if _, err := e.runner.Get(ctx, catchup.JobRef{Name: name}); !errors.Is(err, errs.ErrNotFound) {
		e.t.Fatalf("runner Get of a deleted Job = %v, want errs.ErrNotFound", err)
	}
}

func TestRealTerminateRefusesAReplacedJob(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	spec := catchup.JobSpec{Table: "orders", Name: "r6-a1"}
	old, err := e.runner.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// Someone deletes it and the same execution is created again: same name, new UID.
	bg := metav1.DeletePropagationBackground
	if err := e.admin.BatchV1().Jobs(e.ns).Delete(ctx, old.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	cur, err := e.runner.Create(ctx, spec)
	if err != nil || cur.Name != old.Name || cur.UID == old.UID {
		t.Fatalf("recreate = %v, %v; want same name, new uid", cur, err)
	}
	err = e.runner.Terminate(ctx, old)
	if !errors.Is(err, kube.ErrStale) || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("Terminate with the old UID = %v, want ErrStale (errs.ErrConflict)", err)
	}
	if st, err := e.runner.Get(ctx, cur); err != nil || st.Ref.UID != cur.UID || st.Deleting {
		t.Fatalf("the new Job was touched: %+v, %v", st, err)
	}
	if err := e.runner.Terminate(ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.gone(ctx, cur.Name)
}

func TestRealTerminateRefusesAChangedJob(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "r7-a1"})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
	if _, err := e.admin.BatchV1().Jobs(e.ns).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Terminate(ctx, ref); !errors.Is(err, kube.ErrStale) {
		t.Fatalf("Terminate with a stale resourceVersion = %v, want ErrStale", err)
	}
	st, err := e.runner.Get(ctx, ref)
	if err != nil || st.Deleting || st.Ref.UID != ref.UID || st.Ref.ResourceVersion == ref.ResourceVersion {
		t.Fatalf("after a refused Terminate: %+v, %v", st, err)
	}
	if err := e.runner.Terminate(ctx, st.Ref); err != nil { // re-observed: now it may go
		t.Fatal(err)
	}
	e.gone(ctx, ref.Name)
	if jobs := e.jobs(); len(jobs) != 0 {
		t.Fatalf("jobs %v", jobs)
	}
}

// The controller persists termination intent and repeats Terminate after a
// failure; every repeat must be safe and converge.
func TestRealTerminateRepeatedAfterAFailedAttempt(t *testing.T) {
	t.Run("delete lost before the server", func(t *testing.T) {
		e := newEnv(t)
		ctx := testCtx(t)
		ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "t", Name: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		e.faults.once(http.MethodDelete, "/jobs/"+ref.Name, dropRequest)
		if err := e.runner.Terminate(ctx, ref); !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("Terminate with the API unreachable = %v, want errs.ErrUnavailable", err)
		}
		if _, err := e.runner.Get(ctx, ref); err != nil {
			t.Fatalf("job should still exist: %v", err)
		}
		if err := e.runner.Terminate(ctx, ref); err != nil {
			t.Fatalf("repeat: %v", err)
		}
		e.gone(ctx, ref.Name)
	})
	t.Run("delete applied, response lost", func(t *testing.T) {
		e := newEnv(t)
		ctx := testCtx(t)
		ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "t", Name: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		e.faults.once(http.MethodDelete, "/jobs/"+ref.Name, loseResponse)
		if err := e.runner.Terminate(ctx, ref); !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("Terminate with a lost response = %v, want errs.ErrUnavailable", err)
		}
		e.gone(ctx, ref.Name)
		if err := e.runner.Terminate(ctx, ref); err != nil {
			t.Fatalf("repeat of an applied Terminate: %v", err)
		}
	})
	t.Run("deletion held by a finalizer", func(t *testing.T) {
		e := newEnv(t)
		ctx := testCtx(t)
		ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "t", Name: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		hold := []byte(`{"metadata":{"finalizers":["walctl.dev/test-hold"]}}`)
		held, err := e.admin.BatchV1().Jobs(e.ns).Patch(ctx, ref.Name, types.MergePatchType, hold, metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref.ResourceVersion = held.ResourceVersion
		if err := e.runner.Terminate(ctx, ref); err != nil {
			t.Fatal(err)
		}
		st, err := e.runner.Get(ctx, ref)
		if err != nil || !st.Deleting || st.Ref.ResourceVersion == ref.ResourceVersion {
			t.Fatalf("held Job: %+v, %v; want deleting with a new resourceVersion", st, err)
		}
		// The repeat carries the old resourceVersion: it is recognised as
		// the same, already accepted deletion, not refused as stale.
		if err := e.runner.Terminate(ctx, ref); err != nil {
			t.Fatalf("repeat while deletion is pending: %v", err)
		}
		release := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := e.admin.BatchV1().Jobs(e.ns).Patch(ctx, ref.Name, types.MergePatchType, release, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.gone(ctx, ref.Name)
	})
}

// Terminate passes the caller's deadline on; a cancelled call changes nothing.
func TestRealTerminateCancelled(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "t", Name: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.runner.Terminate(cctx, ref); !errors.Is(err, context.Canceled) || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("cancelled Terminate = %v, want context.Canceled (errs.ErrUnavailable)", err)
	}
	if st, err := e.runner.Get(ctx, ref); err != nil || st.Deleting {
		t.Fatalf("cancelled Terminate touched the Job: %+v, %v", st, err)
	}
}
