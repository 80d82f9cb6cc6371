package kube_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/kube"
	"github.com/walctl/walctl/internal/core/wal"
)

// backlog is a one-table StatsSource with a fixed number of pending
// generations, and its WatermarkFunc.
type backlog struct{}

func (backlog) Tables(context.Context) ([]wal.TableInfo, error) {
	return []wal.TableInfo{{Name: "orders"}}, nil
}

func (backlog) Stats(context.Context, string, map[int]uint64) (wal.TableStats, error) {
	return wal.TableStats{Table: "orders", Shards: []wal.ShardStats{{Shard: 0, PendingGenerations: 9, PendingBytes: 9 << 20}}}, nil
}

func watermarks(context.Context, string) (map[int]uint64, error) { return map[int]uint64{}, nil }

// countingRunner is the real runner, counting PodsTerminal answers of
// false (the controller then keeps the slot) so a test waits for them.
type countingRunner struct {
	catchup.Runner
	notTerminal atomic.Int64
}

func (r *countingRunner) PodsTerminal(ctx context.Context, ref catchup.JobRef) (bool, error) {
	done, err := r.Runner.PodsTerminal(ctx, ref)
	if err == nil && !done {
		r.notTerminal.Add(1)
	}
	return done, err
}

// master is one `walctl master run`: its own etcd connection, Store,
// Master and Controller over package kube's runner, until stop.
type master struct {
	m      *catchup.Master
	ctrl   *catchup.Controller
	runner *countingRunner
	stop   func()
}

func (e *env) startMaster(ctx context.Context, endpoint string, p catchup.Policy) master {
	e.t.Helper()
	co, err := coord.Connect(ctx, coord.Config{Endpoints: []string{endpoint}})
	if err != nil {
		e.t.Fatal(err)
	}
	store := catchup.NewStore(co, catchup.StoreOptions{})
	log := slog.New(slog.DiscardHandler)
	m, err := catchup.OpenMaster(ctx, store, p, log)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &countingRunner{Runner: e.newRunner(func(c *kube.Config) {
		for k, v := range m.Policy().ExecutorEnv() {
			c.Env[k] = v
		}
	})}
	ctrl, err := catchup.NewController(m, catchup.ControllerConfig{Runner: r, Logger: log,
		Scanner: catchup.NewScanner(store, backlog{}, watermarks), ScanInterval: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ctrl.Run(cctx) }()
	return master{m: m, ctrl: ctrl, runner: r, stop: func() { cancel(); <-done; co.Close() }}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting until %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func status(t *testing.T, ctx context.Context, m *catchup.Master) catchup.Status {
	t.Helper()
	st, err := m.Store().Status(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func controllerPolicy() catchup.Policy {
	p := catchup.DefaultPolicy()
	p.Enabled, p.OwnedTargets, p.ThresholdGenerations, p.ObserveInterval = true, []string{"orders"}, 4, time.Second
	p.SoftSlice = 90 * time.Second
	return p
}

func startEtcd(t *testing.T, ctx context.Context) string {
	t.Helper()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv.Endpoint()
}

// newControllerEnv is a namespace, an etcd and the policy of the
// controller tests.
func newControllerEnv(t *testing.T) (*env, context.Context, string, catchup.Policy) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return e, ctx, startEtcd(t, ctx), controllerPolicy()
}

// firstJob runs a master until its scan's Job runs, stops it and returns
// the Job and the status it ran with.
func (e *env) firstJob(ctx context.Context, endpoint string, p catchup.Policy) (batchv1.Job, catchup.Status) {
	e.t.Helper()
	first := e.startMaster(ctx, endpoint, p)
	waitFor(e.t, ctx, "the scan's Job runs", func() bool { return status(e.t, ctx, first.m).Phase == catchup.PhaseRunning })
	st := status(e.t, ctx, first.m)
	first.stop()
	return e.theJob(ctx), st
}

// theJob returns the namespace's only Job.
func (e *env) theJob(ctx context.Context) batchv1.Job {
	e.t.Helper()
	jobs, err := e.admin.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		e.t.Fatalf("jobs: %v %v, want exactly one", jobs, err)
	}
	return jobs.Items[0]
}

// The catch-up controller drives real Jobs through package kube's runner,
// acting as the shipped ServiceAccount: the scan admits, the Job is created
// from the reviewed template with the policy's executor settings; a
// restarted master finds the same Job by its recorded identity (no second
// Job); a cancellation deletes exactly that Job and releases the slot.
func TestControllerDrivesRealJobs(t *testing.T) {
	e, ctx, endpoint, p := newControllerEnv(t)
	job, st := e.firstJob(ctx, endpoint, p)
	if string(job.UID) != *st.JobUID || job.Name != *st.JobID || job.Annotations[kube.AnnotationJobID] != *st.JobID {
		t.Fatalf("job %s uid %s (job id %s); status says uid %s job %s", job.Name, job.UID, job.Annotations[kube.AnnotationJobID], *st.JobUID, *st.JobID)
	}
	wantExecutor(t, job, *st.JobID)

	second := e.startMaster(ctx, endpoint, p)
	defer second.stop()
	waitFor(t, ctx, "the restarted master observes the Job", func() bool { _, ok := second.ctrl.Observation("orders"); return ok })
	if job2 := e.theJob(ctx); job2.UID != job.UID {
		t.Fatalf("after the restart: job uid %s, want only %s", job2.UID, job.UID)
	}
	if st := status(t, ctx, second.m); st.Phase != catchup.PhaseRunning {
		t.Fatalf("a restarted master moved the running Job to %s (%v)", st.Phase, st.OutcomeDetail)
	}
	if err := second.m.Cancel(ctx, "orders", "test", "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "released", func() bool { return !status(t, ctx, second.m).Active })
	if st := status(t, ctx, second.m); st.Outcome == nil || *st.Outcome != catchup.OutcomeCancelled {
		t.Fatalf("outcome %v, want cancelled", st.Outcome)
	}
	if jobs, _ := e.admin.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Fatalf("%d jobs left after the cancellation", len(jobs.Items))
	}
}

// Issue 14 / rule 16: the table leaves the owned targets (the stored policy
// is changed and the master restarted with the new configuration) while its
// Job runs. The restarted master still finds the Job by the identity
// recorded in etcd — it does not read as gone — terminates exactly it, and
// keeps the fleet slot reserved until its Pod is terminal.
func TestJobOfATableNoLongerOwnedKeepsItsSlotUntilItsPodsEnd(t *testing.T) {
	e, ctx, endpoint, p := newControllerEnv(t)
	job, _ := e.firstJob(ctx, endpoint, p)
	pod := e.setPhase(e.createPod(&job, job.Name+"-x"), corev1.PodRunning)

	changed := p
	changed.OwnedTargets = []string{"other"}
	ops, err := coord.Connect(ctx, coord.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	if _, err := catchup.NewStore(ops, catchup.StoreOptions{}).SetPolicy(ctx,
		catchup.PolicyChange{Policy: changed, Actor: "test", Reason: "orders moves away"}); err != nil {
		t.Fatal(err)
	}
	second := e.startMaster(ctx, endpoint, changed)
	defer second.stop()
	waitFor(t, ctx, "the restarted master observes the Job", func() bool { _, ok := second.ctrl.Observation("orders"); return ok })
	st := status(t, ctx, second.m)
	if st.Phase != catchup.PhaseRunning || st.Slot == nil || *st.JobUID != string(job.UID) {
		t.Fatalf("after the restart with orders no longer owned: phase %s slot %v uid %v (%v); want the Job still running in its slot",
			st.Phase, st.Slot, st.JobUID, st.OutcomeDetail)
	}

	if err := second.m.Cancel(ctx, "orders", "test", "test"); err != nil {
		t.Fatalf("cancel of the no longer owned table's Job: %v", err)
	}
	waitFor(t, ctx, "the Job is deleted", func() bool {
		jobs, err := e.admin.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(jobs.Items) == 0
	})
	seen := second.runner.notTerminal.Load()
	waitFor(t, ctx, "the controller sees the Pod still running twice", func() bool { return second.runner.notTerminal.Load() >= seen+2 })
	if st := status(t, ctx, second.m); !st.Active || st.Slot == nil || st.Phase != catchup.PhaseTerminating {
		t.Fatalf("Job deleted, Pod running: phase %s active %v slot %v; want the slot held while terminating", st.Phase, st.Active, st.Slot)
	}

	e.setPhase(pod, corev1.PodFailed)
	waitFor(t, ctx, "released", func() bool { return !status(t, ctx, second.m).Active })
	if st := status(t, ctx, second.m); st.Outcome == nil || *st.Outcome != catchup.OutcomeCancelled || st.Slot != nil {
		t.Fatalf("outcome %v slot %v, want cancelled and no slot", st.Outcome, st.Slot)
	}
}

// wantExecutor checks the Job runs `walctl catchup run` for its identity
// with the policy's settings and equal CPU/memory requests and limits.
func wantExecutor(t *testing.T, job batchv1.Job, jobID string) {
	t.Helper()
	c := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"catchup", "run", "--table", "orders", "--job", jobID}) {
		t.Fatalf("args %v", c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["WALCTL_CATCHUP_SOFT_SLICE"] != "1m30s" || env["WALCTL_CATCHUP_BATCH_GENERATIONS"] != "8" {
		t.Fatalf("executor env %v lacks the policy's settings", env)
	}
	if !c.Resources.Requests.Cpu().Equal(*c.Resources.Limits.Cpu()) || !c.Resources.Requests.Memory().Equal(*c.Resources.Limits.Memory()) {
		t.Fatalf("resources %+v: requests differ from limits", c.Resources)
	}
}
