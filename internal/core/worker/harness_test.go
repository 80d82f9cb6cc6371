package worker

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/stack"
)

// env is one real setup shared by the workers of a test: an embedded etcd,
// an in-process WAL engine and a Lance root, in temporary directories. Each
// worker gets its own etcd client, as a separate process would.
type env struct {
	t     *testing.T
	ctx   context.Context
	st    *stack.Stack
	co    *coord.Client // the operator's client: List, Get, Revoke
	log   *wal.Engine
	lance string

	mu     sync.Mutex // guards nextID
	acked  map[string]*exactlyonce.Acked
	nextID int64
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func newEnv(t *testing.T, shards int, tables ...string) *env {
	t.Helper()
	st := stack.Start(t, 2*time.Minute, wal.Options{MaxGenerationAge: -1, MaxGenerationBytes: 64 << 10})
	e := &env{t: t, ctx: st.Ctx, st: st, lance: st.LanceRoot, log: st.WAL, acked: map[string]*exactlyonce.Acked{}}
	e.co = e.connect()
	for _, table := range tables {
		if _, err := e.log.CreateTable(e.ctx, table, testSchema, shards); err != nil {
			t.Fatal(err)
		}
		e.acked[table] = exactlyonce.NewAcked()
	}
	return e
}

func (e *env) connect() *coord.Client {
	return e.st.Coord(e.t, coord.Config{ClaimTTL: 5 * time.Second})
}

// produce appends n batches of rows records to a shard, then seals it. The
// ids are unique across producers. Safe for concurrent use.
func (e *env) produce(table string, shard, n, rows int) error {
	e.mu.Lock()
	base := e.nextID + 1
	e.nextID += int64(n * rows)
	e.mu.Unlock()
	p, err := exactlyonce.NewProducer(e.log, table, testSchema, uint64(base), base, e.acked[table])
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := p.Append(e.ctx, shard, rows); err != nil {
			return err
		}
	}
	return p.Seal(e.ctx, shard)
}

func (e *env) mustProduce(table string, shard, n, rows int) {
	e.t.Helper()
	if err := e.produce(table, shard, n, rows); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) publisher(co *coord.Client, owner string, lim publish.Limits) *publish.Publisher {
	return e.publisherOn(e.log, co, owner, lim)
}

func (e *env) publisherOn(log wal.Log, co *coord.Client, owner string, lim publish.Limits) *publish.Publisher {
	if lim == (publish.Limits{}) {
		lim = publish.Limits{MaxBytes: 1 << 30, MaxGenerations: 1000, FileBytes: 128 << 10}
	}
	return publish.New(log, co, publish.Config{
		LanceRoot: e.lance,
		Owner:     coord.Owner{ID: owner, Kind: coord.OwnerWorker, Host: "test", PID: os.Getpid()},
		Limits:    lim,
	})
}

// running is a worker started by start.
type running struct {
	name   string
	m      *Metrics
	reg    *prometheus.Registry
	cancel context.CancelFunc
	exited chan struct{} // closed when Run has returned err
	err    error
}

// start runs a worker named owner with its own etcd client and publisher;
// cfg.Log, Metrics and Logger are filled in.
func (e *env) start(owner string, lim publish.Limits, cfg Config) *running {
	return e.startOn(e.log, e.connect(), owner, lim, cfg)
}

// startOn is start with the worker's WAL and etcd client given.
func (e *env) startOn(log wal.Log, co *coord.Client, owner string, lim publish.Limits, cfg Config) *running {
	reg := prometheus.NewRegistry()
	cfg.Log = log
	cfg.Metrics = NewMetrics(reg)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	cfg.Logger = cfg.Logger.With("worker", owner)
	w := New(e.publisherOn(log, co, owner, lim), co, cfg)
	ctx, cancel := context.WithCancel(e.ctx)
	r := &running{name: owner, m: cfg.Metrics, reg: reg, cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(r.exited)
		r.err = w.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			e.t.Errorf("worker %s: Run did not return after cancellation", owner)
		}
	})
	return r
}

// stop cancels the worker and requires Run to return nil within 20s.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.exited:
		if r.err != nil {
			t.Fatalf("worker %s: Run returned %v", r.name, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("worker %s: Run did not return after cancellation", r.name)
	}
}

func (r *running) count(c *prometheus.CounterVec, labels ...string) float64 {
	return testutil.ToFloat64(c.WithLabelValues(labels...))
}

func (r *running) gauge(g *prometheus.GaugeVec, labels ...string) float64 {
	return testutil.ToFloat64(g.WithLabelValues(labels...))
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// published reports whether the table's latest watermarks cover every
// durable WAL entry of every shard.
func (e *env) published(table string) bool {
	r, err := publish.OpenReader(e.lance, table, publish.Selection{})
	if err != nil {
		return false
	}
	st, err := e.log.Stats(e.ctx, table, r.State.Watermarks)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, sh := range st.Shards {
		if r.State.Watermarks[sh.Shard] != sh.LastPosition {
			return false
		}
	}
	return true
}

// pendingGenerations counts sealed generations above the latest watermarks.
func (e *env) pendingGenerations(table string) int {
	var w publish.Watermarks
	if r, err := publish.OpenReader(e.lance, table, publish.Selection{}); err == nil {
		w = r.State.Watermarks
	}
	st, err := e.log.Stats(e.ctx, table, w)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, sh := range st.Shards {
		n += sh.PendingGenerations
	}
	return n
}

// exactlyOnce reads the table's latest version with the managed reader and
// requires every ACKed id exactly once and nothing else.
func (e *env) exactlyOnce(table string) {
	e.t.Helper()
	r, err := publish.OpenReader(e.lance, table, publish.Selection{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []int64
	err = r.Scan(e.ctx, []string{"id"}, func(b arrow.RecordBatch) error {
		col := b.Column(0).(*array.Int64)
		for i := 0; i < col.Len(); i++ {
			ids = append(ids, col.Value(i))
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := exactlyonce.Check(ids, e.acked[table].Snapshot()).Err(); err != nil {
		e.t.Fatalf("%s: %v", table, err)
	}
}

func (e *env) ackedCount(table string) int { return e.acked[table].Len() }

// noClaims requires that etcd holds no claim at all.
func (e *env) noClaims() {
	e.t.Helper()
	cs, err := e.co.List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(cs) != 0 {
		e.t.Fatalf("claims left after shutdown: %+v", cs)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
