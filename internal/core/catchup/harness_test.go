package catchup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	fakeclock "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/catchuptest"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/wal"
)

var prefixSeq atomic.Int64

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// env is one fleet: a key prefix, a fake clock, a fake runner, and one
// "master process" (its own etcd connection, Store, Master, Controller).
type env struct {
	t      *testing.T
	ctx    context.Context
	prefix string
	clock  *fakeclock.FakeClock
	runner *catchuptest.FakeRunner
	policy catchup.Policy
	src    *fakeSource
	*master
}

// master is what one `walctl master run` process holds.
type master struct {
	c     *coord.Client
	store *catchup.Store
	m     *catchup.Master
	ctrl  *catchup.Controller
}

func testPolicy() catchup.Policy {
	p := catchup.DefaultPolicy()
	p.Enabled = true
	p.OwnedTargets = []string{"t1", "t2", "t3", "t4", "t5", "t6"}
	return p
}

func newEnv(t *testing.T, mutate func(*catchup.Policy)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clock: fakeclock.NewFakeClock(t0), runner: catchuptest.NewFakeRunner(),
		prefix: fmt.Sprintf("/test/%d-%s", prefixSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "_")),
		policy: testPolicy(), src: &fakeSource{pending: map[string]int{}}}
	if mutate != nil {
		mutate(&e.policy)
	}
	e.master = e.startMaster(e.policy)
	return e
}

func (e *env) connect() *coord.Client {
	e.t.Helper()
	c, err := coord.Connect(e.ctx, coord.Config{Endpoints: []string{srv.Endpoint()}, Prefix: e.prefix})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// startMaster starts another master process on the same fleet (same
// runner: one Kubernetes namespace).
func (e *env) startMaster(p catchup.Policy) *master {
	e.t.Helper()
	mm, err := e.tryMaster(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return mm
}

func (e *env) tryMaster(p catchup.Policy) (*master, error) {
	c := e.connect()
	s := catchup.NewStore(c, catchup.StoreOptions{Clock: e.clock})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := catchup.OpenMaster(e.ctx, s, p, log)
	if err != nil {
		return nil, err
	}
	ctrl, err := catchup.NewController(m, catchup.ControllerConfig{Runner: e.runner, Clock: e.clock, Logger: log,
		Scanner: catchup.NewScanner(s, e.src, e.src.watermarks)})
	if err != nil {
		return nil, err
	}
	return &master{c: c, store: s, m: m, ctrl: ctrl}, nil
}

// scan sets table's backlog and runs the scan (all tables) now.
func (e *env) scan(table string, pending int) {
	e.t.Helper()
	e.src.set(table, pending)
	sc := catchup.NewScanner(e.store, e.src, e.src.watermarks)
	if _, err := sc.Scan(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) admit(mm *master, table string) catchup.Admission {
	e.t.Helper()
	a, err := mm.m.Admit(e.ctx, catchup.Request{Target: table, Reason: "test", Source: "api"})
	if err != nil {
		e.t.Fatalf("admit %s: %v", table, err)
	}
	return a
}

func (e *env) wantDecision(a catchup.Admission, want catchup.Decision) {
	e.t.Helper()
	if a.Decision != want {
		e.t.Fatalf("table %s: decision %s (%s), want %s", a.Target, a.Decision, a.Message, want)
	}
}

func (e *env) reconcile(mm *master, table string) time.Duration {
	e.t.Helper()
	d, err := mm.ctrl.ReconcileForTest(e.ctx, table)
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", table, err)
	}
	return d
}

func (e *env) status(table string) catchup.Status {
	e.t.Helper()
	st, err := e.store.Status(e.ctx, table)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) wantPhase(table string, want catchup.Phase) catchup.Status {
	e.t.Helper()
	st := e.status(table)
	if st.Phase != want {
		e.t.Fatalf("table %s: phase %s, want %s (status %+v)", table, st.Phase, want, st)
	}
	return st
}

// running admits table with a big backlog and reconciles until its Job
// exists; it returns the Job name.
func (e *env) running(table string) string {
	e.t.Helper()
	e.scan(table, 1000)
	e.wantDecision(e.admit(e.master, table), catchup.DecisionReserved)
	e.reconcile(e.master, table)
	st := e.wantPhase(table, catchup.PhaseRunning)
	return *st.JobID
}

// step advances the fake clock by d and samples table once.
func (e *env) step(table string, d time.Duration) {
	e.t.Helper()
	e.clock.Step(d)
	e.reconcile(e.master, table)
}

func (e *env) countKeys(dir string) int {
	e.t.Helper()
	resp, err := e.c.Etcd().Get(e.ctx, e.prefix+dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	return int(resp.Count)
}

func (e *env) begin(table, job string) catchup.Execution {
	e.t.Helper()
	x, err := e.store.BeginExecution(e.ctx, table, job)
	if err != nil {
		e.t.Fatal(err)
	}
	return x
}

func (e *env) progress(x catchup.Execution, kind catchup.ProgressKind) {
	e.t.Helper()
	if _, err := e.store.RecordProgress(e.ctx, x.Table, x.ExecID, kind); err != nil {
		e.t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

// fakeSource is a WAL with one shard per table and a settable backlog.
type fakeSource struct {
	mu      sync.Mutex
	pending map[string]int
}

func (f *fakeSource) lock()   { f.mu.Lock() }
func (f *fakeSource) unlock() { f.mu.Unlock() }

func (f *fakeSource) set(table string, n int) { f.lock(); f.pending[table] = n; f.unlock() }

func (f *fakeSource) Tables(context.Context) ([]wal.TableInfo, error) {
	f.lock()
	defer f.unlock()
	var out []wal.TableInfo
	for t := range f.pending {
		out = append(out, wal.TableInfo{Name: t, Shards: 1})
	}
	return out, nil
}

func (f *fakeSource) Stats(_ context.Context, table string, wm map[int]uint64) (wal.TableStats, error) {
	f.lock()
	defer f.unlock()
	n := f.pending[table]
	return wal.TableStats{Table: table, Shards: []wal.ShardStats{{Shard: 0, Watermark: wm[0],
		PendingGenerations: n, PendingBytes: int64(n) << 20, OldestPendingAge: time.Duration(n) * time.Second}}}, nil
}

func (f *fakeSource) watermarks(context.Context, string) (map[int]uint64, error) {
	return map[int]uint64{0: 7}, nil
}
