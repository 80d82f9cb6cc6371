package kube_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/kube"
)

// An ambiguous create is reconciled by reading back, never by a second Job.
func TestRealAmbiguousCreateNeverYieldsTwoJobs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault fault
	}{
		{"response lost after the server created the Job", loseResponse},
		{"proxy answered 504 after the server created the Job", gateway504},
		{"request lost before the server saw it", dropRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := testCtx(t)
			spec := catchup.JobSpec{Table: "orders", Name: "r3-a1"}
			e.faults.once(http.MethodPost, "/jobs", tc.fault)
			ref, err := e.runner.Create(ctx, spec)
			if err != nil {
				t.Fatalf("Create after %s: %v", tc.name, err)
			}
			if len(e.faults.log()) != 1 {
				t.Fatalf("fault not injected: %v", e.faults.log())
			}
			jobs := e.jobs()
			if len(jobs) != 1 || jobs[0] != ref.Name+"/"+ref.UID {
				t.Fatalf("jobs %v, want exactly %s/%s", jobs, ref.Name, ref.UID)
			}
			// The controller may repeat Create at any time: still one Job.
			again, err := e.runner.Create(ctx, spec)
			if err != nil || again.UID != ref.UID {
				t.Fatalf("repeat Create = %v, %v", again, err)
			}
			if jobs := e.jobs(); len(jobs) != 1 {
				t.Fatalf("jobs %v after a repeat, want one", jobs)
			}
		})
	}
}

// When even the read-back fails the caller learns that the outcome is
// unknown; repeating Create once the API answers adopts the Job created by
// the lost request.
func TestRealAmbiguousCreateWithAnOutageIsResolvedByRepeating(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	spec := catchup.JobSpec{Table: "orders", Name: "r4-a1"}
	first := true
	e.faults.set(func(r *http.Request) fault {
		if first && r.Method == http.MethodPost {
			first = false
			return loseResponse // the create lands, its answer does not
		}
		return dropRequest // then the API is unreachable
	})
	_, err := e.runner.Create(ctx, spec)
	if !errors.Is(err, kube.ErrAmbiguous) || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Create during an outage = %v, want ErrAmbiguous (errs.ErrUnavailable)", err)
	}
	if jobs := e.jobs(); len(jobs) != 1 {
		t.Fatalf("jobs %v, want the one the lost request created", jobs)
	}
	e.faults.set(nil)
	ref, err := e.runner.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if jobs := e.jobs(); len(jobs) != 1 || !strings.HasSuffix(jobs[0], "/"+ref.UID) {
		t.Fatalf("jobs %v, want exactly the adopted %s", jobs, ref)
	}
}

// A Job holding the deterministic name but carrying another identity (here:
// made by hand with the same name) is never adopted.
func TestRealForeignJobUnderOurNameIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	spec := catchup.JobSpec{Table: "orders", Name: "r5-a1"}
	job, err := e.runner.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	job.Annotations[kube.AnnotationJobID] = "r5-a0"
	if _, err := e.admin.BatchV1().Jobs(e.ns).Create(ctx, job, createOpts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runner.Create(ctx, spec); !errors.Is(err, kube.ErrNotOurs) || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("Create over a foreign Job = %v, want ErrNotOurs (errs.ErrConflict)", err)
	}
	if jobs := e.jobs(); len(jobs) != 1 {
		t.Fatalf("jobs %v", jobs)
	}
}
