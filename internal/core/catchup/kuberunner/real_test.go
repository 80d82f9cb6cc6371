package kuberunner_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/kuberunner"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/kube"
	"github.com/walctl/walctl/internal/core/kube/kubetest"
	"github.com/walctl/walctl/internal/core/wal"
)

var apiserver *kubetest.Server

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &apiserver)) }

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

// master is one `walctl master run`: its own etcd connection, Store,
// Master, adapter over package kube, and Controller running until stop.
type master struct {
	m    *catchup.Master
	stop func()
}

func startMaster(t *testing.T, ctx context.Context, endpoint string, p catchup.Policy, rc *rest.Config, ns string) master {
	t.Helper()
	co, err := coord.Connect(ctx, coord.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	store := catchup.NewStore(co, catchup.StoreOptions{})
	log := slog.New(slog.DiscardHandler)
	m, err := catchup.OpenMaster(ctx, store, p, log)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := kube.LoadTemplate(filepath.Join("..", "..", "..", "..", "deploy", "catchup-job-template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := kuberunner.ExecutorEnv(m.Policy())
	env["WALCTL_ETCD_ENDPOINTS"], env["WALCTL_WAL"] = "http://etcd:2379", "wal:7070"
	k, err := kube.NewRunnerForConfig(rc, kube.Config{Namespace: ns, Template: tpl, CPU: resource.MustParse("1"),
		Memory: resource.MustParse("2Gi"), Env: env}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := catchup.NewController(m, catchup.ControllerConfig{Runner: kuberunner.New(k, co.Prefix(), m.Policy().OwnedTargets),
		Logger: log, Scanner: catchup.NewScanner(store, backlog{}, watermarks), ScanInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ctrl.Run(cctx) }()
	return master{m: m, stop: func() { cancel(); <-done; co.Close() }}
}

func waitStatus(t *testing.T, ctx context.Context, m *catchup.Master, what string, cond func(catchup.Status) bool) catchup.Status {
	t.Helper()
	for {
		st, err := m.Store().Status(ctx, "orders")
		if err == nil && cond(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting until %s: %v (last %+v, %v)", what, ctx.Err(), st, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The catch-up controller drives real Jobs through the adapter, acting as
// the shipped ServiceAccount: the scan admits, the Job is created from the
// reviewed template with the policy's executor settings; a restarted master
// finds the same Job by its catch-up name (no second Job); a cancellation
// deletes exactly that Job and releases the slot.
func TestControllerDrivesRealJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := "catchup-controller"
	rc, err := apiserver.MasterConfig(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := catchup.DefaultPolicy()
	p.Enabled, p.OwnedTargets, p.ThresholdGenerations, p.ObserveInterval = true, []string{"orders"}, 4, time.Second
	p.SoftSlice = 90 * time.Second

	first := startMaster(t, ctx, srv.Endpoint(), p, rc, ns)
	st := waitStatus(t, ctx, first.m, "the scan's Job runs", func(s catchup.Status) bool { return s.Phase == catchup.PhaseRunning })
	first.stop()
	admin := apiserver.AdminClient()
	jobs, err := admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs: %v %v, want exactly one", jobs, err)
	}
	job := jobs.Items[0]
	if string(job.UID) != *st.JobUID || job.Annotations[kube.AnnotationJobID] != *st.JobID {
		t.Fatalf("job %s uid %s (job id %s); status says uid %s job %s", job.Name, job.UID, job.Annotations[kube.AnnotationJobID], *st.JobUID, *st.JobID)
	}
	wantExecutor(t, job, *st.JobID)

	// A restarted master reconciles the same Job, and its cancellation
	// terminates exactly that Job and releases the slot.
	second := startMaster(t, ctx, srv.Endpoint(), p, rc, ns)
	defer second.stop()
	time.Sleep(2 * time.Second) // two observation intervals of the new master
	if jobs, _ := admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); len(jobs.Items) != 1 || jobs.Items[0].UID != job.UID {
		t.Fatalf("after the restart: %d jobs, want only %s", len(jobs.Items), job.UID)
	}
	if st := waitStatus(t, ctx, second.m, "still running", func(catchup.Status) bool { return true }); st.Phase != catchup.PhaseRunning {
		t.Fatalf("a restarted master moved the running Job to %s (%v)", st.Phase, st.OutcomeDetail)
	}
	if err := second.m.Cancel(ctx, "orders", "test", "test"); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, ctx, second.m, "released", func(s catchup.Status) bool { return !s.Active })
	if st.Outcome == nil || *st.Outcome != catchup.OutcomeCancelled {
		t.Fatalf("outcome %v, want cancelled", st.Outcome)
	}
	if jobs, _ := admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Fatalf("%d jobs left after the cancellation", len(jobs.Items))
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
