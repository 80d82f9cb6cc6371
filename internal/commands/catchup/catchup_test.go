package catchup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	coremaster "github.com/walctl/walctl/internal/core/master"
)

// fakeAPI records what reached the master and answers as told.
type fakeAPI struct {
	submitted []coremaster.SubmitRequest
	cancelled []coremaster.CancelRequest
	decision  corecatchup.Decision
	err       error
}

func (a *fakeAPI) Submit(_ context.Context, req coremaster.SubmitRequest) (corecatchup.Admission, error) {
	a.submitted = append(a.submitted, req)
	job := "walctl-catchup-" + req.Target + "-0-1"
	return corecatchup.Admission{Target: req.Target, Decision: a.decision, DryRun: req.DryRun, JobID: &job}, a.err
}

func (a *fakeAPI) Status(_ context.Context, table string) (corecatchup.Status, error) {
	return corecatchup.Status{Target: table, Phase: corecatchup.PhaseRunning, Active: true}, a.err
}

func (a *fakeAPI) Cancel(_ context.Context, req coremaster.CancelRequest) (corecatchup.Status, error) {
	a.cancelled = append(a.cancelled, req)
	return corecatchup.Status{Target: req.Target, Phase: corecatchup.PhaseTerminating}, a.err
}

// fakePolicies is a stored policy at a revision.
type fakePolicies struct {
	stored corecatchup.StoredPolicy
	change corecatchup.PolicyChange
	err    error
}

func (f *fakePolicies) LoadPolicy(context.Context) (corecatchup.StoredPolicy, error) {
	return f.stored, f.err
}
func (f *fakePolicies) SetPolicy(_ context.Context, ch corecatchup.PolicyChange) (corecatchup.PolicyChangeResult, error) {
	f.change = ch
	fields := ch.Policy.Diff(f.stored.Policy)
	return corecatchup.PolicyChangeResult{Before: f.stored, After: corecatchup.StoredPolicy{Policy: ch.Policy, Revision: f.stored.Revision + 1},
		Fields: fields, AuditKey: "/walctl/v1/audit/x-catchup-policy"}, f.err
}

func fakeDeps(api *fakeAPI, pol *fakePolicies, printed *any) deps {
	return deps{
		Master:   func() (API, error) { return api, nil },
		Policies: func(context.Context) (PolicyStore, error) { return pol, nil },
		Print:    func(v any, rows func() *render.Table) error { *printed = v; rows(); return nil },
	}
}

func TestSubmitRun(t *testing.T) {
	var printed any
	api := &fakeAPI{decision: corecatchup.DecisionReserved}
	opts := &SubmitOptions{deps: fakeDeps(api, nil, &printed), Target: "orders", Reason: "backlog"}
	if err := submitRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if a, ok := printed.(corecatchup.Admission); !ok || a.Decision != corecatchup.DecisionReserved || api.submitted[0].Reason != "backlog" {
		t.Fatalf("printed %+v, sent %+v", printed, api.submitted)
	}
	api.decision = corecatchup.DecisionNotOwned
	var exit *cmdutil.ExitError
	if err := submitRun(context.Background(), opts); !errors.As(err, &exit) || exit.Code != cmdutil.ExitAdmissionRefused {
		t.Fatalf("refused admission: %v, want exit %d", err, cmdutil.ExitAdmissionRefused)
	}
	opts.DryRun = true
	if err := submitRun(context.Background(), opts); err != nil {
		t.Fatalf("a refused dry run is an answer: %v", err)
	}
}

func TestStatusAndCancelRun(t *testing.T) {
	var printed any
	api := &fakeAPI{}
	if err := statusRun(context.Background(), &StatusOptions{deps: fakeDeps(api, nil, &printed), Target: "orders"}); err != nil {
		t.Fatal(err)
	}
	if st := printed.(corecatchup.Status); st.Target != "orders" || !st.Active {
		t.Fatalf("status printed %+v", st)
	}
	if err := cancelRun(context.Background(), &CancelOptions{deps: fakeDeps(api, nil, &printed), Target: "orders", Reason: "why"}); err != nil {
		t.Fatal(err)
	}
	if st := printed.(corecatchup.Status); st.Phase != corecatchup.PhaseTerminating || api.cancelled[0].Reason != "why" {
		t.Fatalf("cancel printed %+v, sent %+v", st, api.cancelled)
	}
	api.err = &coremaster.APIError{Status: 409, Message: "already finished"}
	printed = nil
	if err := cancelRun(context.Background(), &CancelOptions{deps: fakeDeps(api, nil, &printed), Target: "orders"}); !errors.Is(err, errs.ErrConflict) || printed != nil {
		t.Fatalf("refused cancel: %v (printed %v), want errs.ErrConflict and nothing printed", err, printed)
	}
}

func stored() *fakePolicies {
	p, _ := corecatchup.Policy{Enabled: true, OwnedTargets: []string{"orders"}}.Normalize()
	return &fakePolicies{stored: corecatchup.StoredPolicy{Policy: p, Revision: 41}}
}

func TestPolicyShowRun(t *testing.T) {
	var printed any
	pol := stored()
	if err := policyShowRun(context.Background(), &PolicyShowOptions{deps: fakeDeps(nil, pol, &printed)}); err != nil {
		t.Fatal(err)
	}
	if sp := printed.(corecatchup.StoredPolicy); sp.Revision != 41 || !sp.Policy.Owns("orders") {
		t.Fatalf("printed %+v", sp)
	}
	pol.err = corecatchup.ErrNoPolicy
	if err := policyShowRun(context.Background(), &PolicyShowOptions{deps: fakeDeps(nil, pol, &printed)}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("no policy: %v, want errs.ErrNotFound", err)
	}
}

// The flags given change the stored policy's fields, the others keep their
// stored values; the change is a CAS on the revision read.
func TestPolicySetRun(t *testing.T) {
	opts, _, err := cmdtest.Parse(t, NewCmdPolicySet, []string{"--add-owned-target", "invoices", "--max-jobs", "2",
		"--batch-bytes", "32MiB", "--idle", "5m", "--reason", "more"})
	if err != nil {
		t.Fatal(err)
	}
	var printed any
	pol := stored()
	var errOut bytes.Buffer
	opts.deps, opts.ErrOut, opts.Actor = fakeDeps(nil, pol, &printed), &errOut, "ops@host"
	if err := policySetRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	ch := pol.change
	want := pol.stored.Policy
	want.OwnedTargets, want.MaxJobs, want.BatchBytes, want.Idle = []string{"orders", "invoices"}, 2, 32<<20, 5*time.Minute
	if d := ch.Policy.Diff(want); len(d) != 0 || ch.ExpectRevision != 41 || ch.Actor != "ops@host" || ch.Reason != "more" {
		t.Fatalf("change %+v differs from the asked one in %v", ch, d)
	}
	if !strings.Contains(errOut.String(), "restart every master") {
		t.Fatalf("stderr %q does not say what to do next", errOut.String())
	}

	opts, _, _ = cmdtest.Parse(t, NewCmdPolicySet, []string{"--remove-owned-target", "orders", "--expect-revision", "7"})
	opts.deps, opts.ErrOut = fakeDeps(nil, pol, &printed), &errOut
	if err := policySetRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if len(pol.change.Policy.OwnedTargets) != 0 || pol.change.ExpectRevision != 7 {
		t.Fatalf("change %+v", pol.change)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdPolicySet, nil); !cmdutil.IsFlagError(err) {
		t.Fatalf("no change asked: %v, want a usage error", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdPolicySet, []string{"--batch-bytes", "lots"}); err == nil {
		t.Fatal("a bad size was accepted")
	}
	if !slices.Equal(pol.stored.Policy.OwnedTargets, []string{"orders"}) {
		t.Fatalf("the policy read was mutated: %v", pol.stored.Policy.OwnedTargets)
	}
}

// unusedAdmission and unusedWAL fail the test if the executor reaches them.
type unusedAdmission struct{ t *testing.T }

func (a unusedAdmission) BeginExecution(context.Context, string, string) (corecatchup.Execution, error) {
	a.t.Fatal("an execution began without the table")
	return corecatchup.Execution{}, nil
}
func (a unusedAdmission) CheckAdmission(context.Context, string, uint64) error { return nil }
func (a unusedAdmission) RecordProgress(context.Context, string, uint64, corecatchup.ProgressKind) (uint64, error) {
	return 0, nil
}
func (a unusedAdmission) Heartbeat(context.Context, string, uint64) error { return nil }

type refusingAcquirer struct{ err error }

func (r refusingAcquirer) Acquire(context.Context, string) (executor.Session, error) {
	return nil, r.err
}

// The executor whose table another holder has: the report (no batches,
// the claim's error) is printed and the error is the claim's (exit 4).
func TestRunRunWhenTheTableIsHeld(t *testing.T) {
	opts, _, err := cmdtest.Parse(t, NewCmdRun, []string{"--table", "orders", "--job", "walctl-catchup-orders-1a2b3c4d-1"})
	if err != nil {
		t.Fatal(err)
	}
	var printed any
	var guard func(context.Context, string) error
	held := fmt.Errorf("table orders is claimed by worker w1: %w", coord.ErrClaimed)
	opts.Admission = func(context.Context) (executor.Admission, error) { return unusedAdmission{t}, nil }
	opts.WAL = func(context.Context) (executor.Sealed, error) { return nil, nil }
	opts.Publisher = func(_ context.Context, o *RunOptions, g func(context.Context, string) error, _ func() string) (executor.Acquirer, error) {
		guard = g
		return refusingAcquirer{held}, nil
	}
	ios, _, _, _ := cmdutil.Test()
	opts.Progress = func() *progress.Reporter { return progress.New(ios.ErrOut, false, true, time.Now) }
	opts.Print = func(v any, rows func() *render.Table) error { printed = v; rows(); return nil }
	err = runRun(context.Background(), opts)
	if !errors.Is(err, coord.ErrClaimed) || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("runRun: %v, want the claim's error", err)
	}
	rep, ok := printed.(*executor.Report)
	if !ok || rep.Outcome != executor.OutcomeFailed || rep.Error == "" || len(rep.Batches) != 0 || rep.JobID != "walctl-catchup-orders-1a2b3c4d-1" {
		t.Fatalf("printed %+v", printed)
	}
	if guard == nil || guard(context.Background(), "orders") == nil {
		t.Fatal("the publisher's commit guard is missing or admits before any execution began")
	}
}
