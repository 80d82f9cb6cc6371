package kuberunner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/kube"
)

// fakeKube keeps Jobs by package kube's name, as the API server would.
type fakeKube struct {
	jobs      map[string]kube.JobStatus
	terminate error
}

func (f *fakeKube) Create(_ context.Context, spec kube.JobSpec) (kube.JobRef, error) {
	name := kube.JobName(spec)
	if st, ok := f.jobs[name]; ok {
		return st.Ref, nil
	}
	ref := kube.JobRef{Name: name, UID: "uid-" + spec.JobID, ResourceVersion: "1"}
	f.jobs[name] = kube.JobStatus{Ref: ref, Table: spec.Table, JobID: spec.JobID, Outcome: kube.OutcomeRunning}
	return ref, nil
}

func (f *fakeKube) Get(_ context.Context, name string) (kube.JobStatus, error) {
	st, ok := f.jobs[name]
	if !ok {
		return kube.JobStatus{}, fmt.Errorf("job %s: %w", name, errs.ErrNotFound)
	}
	return st, nil
}

func (f *fakeKube) Terminate(context.Context, kube.JobRef) error { return f.terminate }

func (f *fakeKube) PodsTerminal(context.Context, kube.JobRef) (bool, error) { return true, nil }

const prefix = "/walctl/v1"

func TestGetResolvesTheCatchupNameAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	k := &fakeKube{jobs: map[string]kube.JobStatus{}}
	owned := []string{"events", "orders", "Orders_2"}
	spec := catchup.JobSpec{Name: catchup.JobName(prefix, "Orders_2", 3), Table: "Orders_2", JobID: catchup.JobName(prefix, "Orders_2", 3)}
	ref, err := New(k, prefix, owned).Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Name != kube.JobName(kube.JobSpec{Table: "Orders_2", JobID: spec.JobID}) || ref.UID == "" {
		t.Fatalf("ref %+v does not name the Kubernetes Job", ref)
	}
	restarted := New(k, prefix, owned) // no state carried over
	st, err := restarted.Get(ctx, spec.JobID)
	if err != nil || st.Ref != ref || st.State != catchup.JobActive {
		t.Fatalf("get after restart: %+v %v, want active %+v", st, err, ref)
	}
	for _, name := range []string{catchup.JobName(prefix, "Orders_2", 4), catchup.JobName(prefix, "unowned", 3), "garbage", "x-0"} {
		if _, err := restarted.Get(ctx, name); !errors.Is(err, catchup.ErrJobNotFound) {
			t.Errorf("get %q: %v, want ErrJobNotFound", name, err)
		}
	}
	kn := ref.Name
	for outcome, want := range map[kube.Outcome]catchup.JobState{kube.OutcomeSucceeded: catchup.JobSucceeded, kube.OutcomeFailed: catchup.JobFailed} {
		js := k.jobs[kn]
		js.Outcome = outcome
		k.jobs[kn] = js
		if st, _ := restarted.Get(ctx, spec.JobID); st.State != want {
			t.Errorf("outcome %s: state %s, want %s", outcome, st.State, want)
		}
	}
}

func TestErrorsMapOntoRunnerErrors(t *testing.T) {
	ctx := context.Background()
	k := &fakeKube{jobs: map[string]kube.JobStatus{}, terminate: fmt.Errorf("delete: %w", kube.ErrStale)}
	r := New(k, prefix, []string{"orders"})
	if err := r.Terminate(ctx, catchup.JobRef{Name: "n", UID: "u", ResourceVersion: "1"}); !errors.Is(err, catchup.ErrJobPrecondition) {
		t.Fatalf("stale terminate: %v, want ErrJobPrecondition", err)
	}
	k.terminate = nil
	if err := r.Terminate(ctx, catchup.JobRef{Name: "n", UID: "u", ResourceVersion: "1"}); err != nil {
		t.Fatal(err)
	}
}

func TestExecutorEnvLeavesIdentityToKube(t *testing.T) {
	env := ExecutorEnv(catchup.DefaultPolicy())
	if _, ok := env["WALCTL_CATCHUP_TABLE"]; ok {
		t.Fatal("the table is in the shared env")
	}
	if env["WALCTL_CATCHUP_SOFT_SLICE"] != "30m0s" || env["WALCTL_CATCHUP_BATCH_GENERATIONS"] != "8" {
		t.Fatalf("env %v", env)
	}
}
