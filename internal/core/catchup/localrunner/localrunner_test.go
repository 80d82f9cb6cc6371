package localrunner

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fakeclock "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/catchup"
)

// The test binary doubles as the executor: with WALCTL_TEST_EXECUTOR set it
// behaves as the mode says instead of running tests.
func TestMain(m *testing.M) {
	switch os.Getenv("WALCTL_TEST_EXECUTOR") {
	case "":
		os.Exit(m.Run())
	case "exit3":
		os.Exit(3)
	case "exit0":
		os.Exit(0)
	case "env": // exit 0 only when the dropped variable was not inherited
		if os.Getenv("WALCTL_TEST_SECRET") != "" {
			os.Exit(9)
		}
		os.Exit(0)
	case "wait": // until SIGTERM, then a clean exit
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		<-ch
		os.Exit(0)
	case "ignore": // ignores SIGTERM: only SIGKILL ends it
		signal.Ignore(syscall.SIGTERM)
		_ = os.WriteFile(os.Getenv("WALCTL_TEST_READY"), nil, 0o644)
		for {
			time.Sleep(time.Hour)
		}
	}
}

func newRunner(t *testing.T, mode string, clk *fakeclock.FakeClock) *Runner {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Executable: exe, GlobalArgs: []string{"-test.run=^$", "--"}, Env: []string{"WALCTL_TEST_EXECUTOR=" + mode},
		LogDir: t.TempDir(), Grace: time.Minute}
	if clk != nil {
		cfg.Clock = clk
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func spec(name string) catchup.JobSpec {
	return catchup.JobSpec{Name: name, Table: "t", Attempt: 1, SoftSlice: time.Minute,
		BatchBytes: 1, BatchGenerations: 1, MergeBufferBytes: 1, CacheBytes: 1}
}

// eventually waits (bounded) for cond; processes exit asynchronously.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminal(t *testing.T, r *Runner, ref catchup.JobRef) func() bool {
	return func() bool {
		done, err := r.PodsTerminal(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		return done
	}
}

func TestCreateIsIdempotentAndTerminateIsGuarded(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, "wait", nil)
	ref, err := r.Create(ctx, spec("j1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Create(ctx, spec("j1"))
	if err != nil || again != ref {
		t.Fatalf("second create: %+v %v, want the same %+v", again, err, ref)
	}
	if pid, start, err := parseUID(ref.UID); err != nil || pid <= 0 || start == 0 {
		t.Fatalf("uid %q: %v", ref.UID, err)
	}
	st, err := r.Get(ctx, catchup.JobRef{Name: "j1"})
	if err != nil || st.State != catchup.JobActive || st.Ref != ref {
		t.Fatalf("get: %+v %v", st, err)
	}
	stale := ref
	stale.UID = "1-1"
	if err := r.Terminate(ctx, stale); !errors.Is(err, catchup.ErrJobPrecondition) {
		t.Fatalf("terminate with a stale uid: %v, want ErrJobPrecondition", err)
	}
	if done, _ := r.PodsTerminal(ctx, ref); done {
		t.Fatal("a running process reported terminal")
	}
	if err := r.Terminate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, catchup.JobRef{Name: "j1"}); !errors.Is(err, catchup.ErrJobNotFound) {
		t.Fatalf("get after terminate: %v, want ErrJobNotFound", err)
	}
	eventually(t, "the terminated process exits", terminal(t, r, ref))
}

// A master that took over finds the process its predecessor started for
// the Job but did not live to record: Create returns that process, and
// starts no second one; another fleet's runner (other etcd endpoints)
// does not take it for its own.
func TestCreateAdoptsTheFleetsRunningProcess(t *testing.T) {
	ctx := context.Background()
	fleet := func(endpoints string) *Runner {
		r := newRunner(t, "wait", nil)
		r.cfg.GlobalArgs = append(r.cfg.GlobalArgs, "--etcd-endpoints", endpoints, "--etcd-prefix", "/p")
		return r
	}
	first, successor, other := fleet("http://a"), fleet("http://a"), fleet("http://b")
	name := "adopt-" + strconv.Itoa(os.Getpid())
	ref, err := first.Create(ctx, spec(name))
	if err != nil {
		t.Fatal(err)
	}
	again, err := successor.Create(ctx, spec(name))
	if err != nil || again != ref {
		t.Fatalf("successor's create: %+v %v, want the running %+v", again, err, ref)
	}
	foreign, err := other.Create(ctx, spec(name))
	if err != nil || foreign.UID == ref.UID {
		t.Fatalf("another fleet's create: %+v %v, want a process of its own", foreign, err)
	}
	for _, r := range []struct {
		r   *Runner
		ref catchup.JobRef
	}{{first, ref}, {other, foreign}} {
		if err := r.r.Terminate(ctx, r.ref); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the process exits", terminal(t, r.r, r.ref))
	}
}

func TestExitCodeIsTheJobState(t *testing.T) {
	ctx := context.Background()
	for mode, want := range map[string]catchup.JobState{"exit0": catchup.JobSucceeded, "exit3": catchup.JobFailed} {
		r := newRunner(t, mode, nil)
		ref, err := r.Create(ctx, spec("j-"+mode))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, mode+" exits", terminal(t, r, ref))
		st, err := r.Get(ctx, ref)
		if err != nil || st.State != want {
			t.Fatalf("%s: %+v %v, want %s", mode, st, err, want)
		}
		if mode == "exit3" && !strings.Contains(st.Detail, "exit code 3") {
			t.Fatalf("detail %q", st.Detail)
		}
	}
}

func TestDropEnvIsNotInherited(t *testing.T) {
	t.Setenv("WALCTL_TEST_SECRET", "s3cret")
	r := newRunner(t, "env", nil)
	r.cfg.DropEnv = []string{"WALCTL_TEST_SECRET"}
	ref, err := r.Create(context.Background(), spec("j-env"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child exits", terminal(t, r, ref))
	if st, err := r.Get(context.Background(), ref); err != nil || st.State != catchup.JobSucceeded {
		t.Fatalf("%+v %v: the child saw the dropped variable", st, err)
	}
}

// SIGTERM ignored: SIGKILL follows after the grace (on the injected clock).
func TestKillAfterGrace(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.NewFakeClock(time.Now())
	r := newRunner(t, "ignore", clk)
	ready := t.TempDir() + "/ready"
	r.cfg.Env = append(r.cfg.Env, "WALCTL_TEST_READY="+ready)
	ref, err := r.Create(ctx, spec("j2"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child ignores SIGTERM", func() bool { _, err := os.Stat(ready); return err == nil })
	if err := r.Terminate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the grace timer is armed", clk.HasWaiters)
	if done, _ := r.PodsTerminal(ctx, ref); done {
		t.Fatal("terminal before the grace ended although SIGTERM is ignored")
	}
	clk.Step(time.Minute)
	eventually(t, "SIGKILL ends the process", terminal(t, r, ref))
}

// A restarted master finds the process by the UID recorded in etcd: Get
// sees it running (not by its name alone), its slot stays held while it
// runs, and termination reaches it.
func TestRestartedMasterFindsProcessByUID(t *testing.T) {
	ctx := context.Background()
	first := newRunner(t, "wait", nil)
	ref, err := first.Create(ctx, spec("j3"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child is running", func() bool { return alive(ref) })
	second := newRunner(t, "wait", nil)
	if _, err := second.Get(ctx, catchup.JobRef{Name: "j3"}); !errors.Is(err, catchup.ErrJobNotFound) {
		t.Fatalf("get by name alone on a restarted master: %v, want ErrJobNotFound", err)
	}
	if st, err := second.Get(ctx, ref); err != nil || st.State != catchup.JobActive || st.Ref != ref {
		t.Fatalf("get by the recorded identity on a restarted master: %+v, %v; want active %v", st, err, ref)
	}
	if done, _ := second.PodsTerminal(ctx, ref); done {
		t.Fatal("a live orphan reported terminal")
	}
	if err := second.Terminate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the orphan exits", terminal(t, second, ref))
	if _, err := second.Get(ctx, ref); !errors.Is(err, catchup.ErrJobNotFound) {
		t.Fatalf("get of an exited orphan: %v, want ErrJobNotFound", err)
	}
	if err := second.Terminate(ctx, ref); !errors.Is(err, catchup.ErrJobNotFound) {
		t.Fatalf("terminate of an exited orphan: %v, want ErrJobNotFound", err)
	}
	if !slices.Contains(spec("j3").Args(), "--job") {
		t.Fatal("spec args lost --job")
	}
}
