package catchup

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/errs"
)

// parseRun runs `catchup run` with args (after "catchup run") through the
// real configuration loading and captures the options.
func parseRun(t *testing.T, args []string) (*RunOptions, error) {
	t.Helper()
	o, _, err := cmdtest.Parse(t, NewCmdRun, args)
	return o, err
}

func jobSpec() corecatchup.JobSpec {
	return corecatchup.JobSpec{Name: "walctl-catchup-orders-1a2b3c4d-3", Table: "orders",
		Attempt: 3, SoftSlice: 90 * time.Second, BatchBytes: 32 << 20, BatchGenerations: 5, MergeBufferBytes: 512 << 20, CacheBytes: 64 << 20}
}

func wantSpec(t *testing.T, got *RunOptions, s corecatchup.JobSpec) {
	t.Helper()
	if got == nil {
		t.Fatal("run was not reached")
	}
	if got.Table != s.Table || got.JobID != s.Name || got.SoftSlice != s.SoftSlice || got.BatchBytes != s.BatchBytes ||
		got.BatchGenerations != s.BatchGenerations || got.MergeBufferBytes != s.MergeBufferBytes || got.CacheBytes != s.CacheBytes {
		t.Fatalf("options %+v, want the spec %+v", got, s)
	}
}

// The master's runners start the executor with JobSpec.Args (local
// processes) or with the identity as arguments and Policy.ExecutorEnv
// (Kubernetes Jobs): both must reach the executor unchanged.
func TestRunAcceptsJobSpecArgs(t *testing.T) {
	s := jobSpec()
	args := s.Args()
	if args[0] != "catchup" || args[1] != "run" {
		t.Fatalf("spec args %v do not start with catchup run", args)
	}
	got, err := parseRun(t, args[2:])
	if err != nil {
		t.Fatal(err)
	}
	wantSpec(t, got, s)
}

func TestRunAcceptsExecutorEnv(t *testing.T) {
	s := jobSpec()
	p := corecatchup.Policy{SoftSlice: s.SoftSlice, BatchBytes: s.BatchBytes, BatchGenerations: s.BatchGenerations,
		MergeBufferBytes: s.MergeBufferBytes, CacheBytes: s.CacheBytes}
	for k, v := range p.ExecutorEnv() {
		t.Setenv(k, v)
	}
	got, err := parseRun(t, []string{"--table", s.Table, "--job", s.Name})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec(t, got, s)
}

func TestRunDefaultsAreThePolicyDefaults(t *testing.T) {
	got, err := parseRun(t, []string{"--table", "orders", "--job", "j"})
	if err != nil {
		t.Fatal(err)
	}
	d := corecatchup.DefaultPolicy()
	if got.SoftSlice != d.SoftSlice || got.BatchBytes != d.BatchBytes || got.BatchGenerations != d.BatchGenerations ||
		got.MergeBufferBytes != d.MergeBufferBytes || got.CacheBytes != d.CacheBytes {
		t.Fatalf("defaults %+v, want §4's %+v", got, d)
	}
}

func TestRunRequiresTableAndJob(t *testing.T) {
	for _, args := range [][]string{{"--job", "j"}, {"--table", "orders"}, {"--table", "t", "--job", "j", "--batch-bytes", "0"}} {
		if _, err := parseRun(t, args); !cmdutil.IsFlagError(err) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

func TestExitCodesOfOutcomes(t *testing.T) {
	cause := errors.New("x")
	for o, want := range map[executor.Outcome]int{
		executor.OutcomeAdmissionClosed: cmdutil.ExitAdmissionClosed,
		executor.OutcomeWrongExecution:  cmdutil.ExitWrongExecution,
	} {
		var ee *cmdutil.ExitError
		if err := exitFor(o, cause); !errors.As(err, &ee) || ee.Code != want || !errors.Is(err, cause) {
			t.Errorf("%s: %v, want exit %d wrapping the cause", o, err, want)
		}
	}
	if exitFor(executor.OutcomeCaughtUp, nil) != nil || exitFor(executor.OutcomeSliceEnded, nil) != nil {
		t.Error("a successful outcome is an error")
	}
	fenced := errors.Join(errs.ErrFenced)
	if err := exitFor(executor.OutcomeFenced, fenced); !errors.Is(err, errs.ErrFenced) {
		t.Errorf("fenced: %v", err)
	}
	if !strings.Contains(runExitHelp, "11") || !strings.Contains(runExitHelp, "12") {
		t.Error("the help does not document the catch-up exit codes")
	}
}
