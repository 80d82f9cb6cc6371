package executor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/watermarks"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/schemaspec"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	teststack "github.com/walctl/walctl/internal/testutil/stack"
)

// stack is the real catch-up stack in one process: embedded etcd, the WAL
// engine, Lance tables, the master's admission and a reservation.
type stack struct {
	t     *testing.T
	ctx   context.Context
	co    *coord.Client
	log   *wal.Engine
	root  string
	store *catchup.Store
	m     *catchup.Master
	job   string
}

func newStack(t *testing.T, generations int) *stack {
	t.Helper()
	st := teststack.Start(t, time.Minute, wal.Options{})
	ctx, eng, dir := st.Ctx, st.WAL, st.Dir
	co := st.Coord(t, coord.Config{})
	schema, err := schemaspec.Parse([]byte(`[{"name": "id", "type": "int64"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateTable(ctx, "t", schema, 1); err != nil {
		t.Fatal(err)
	}
	gen, err := synth.New(schema, 1)
	if err != nil {
		t.Fatal(err)
	}
	for g := 0; g < generations; g++ {
		b := gen.Batch(100)
		if _, err := eng.Append(ctx, "t", 0, b); err != nil {
			t.Fatal(err)
		}
		b.Release()
		if _, err := eng.Seal(ctx, "t", 0); err != nil {
			t.Fatal(err)
		}
	}
	s := &stack{t: t, ctx: ctx, co: co, log: eng, root: filepath.Join(dir, "tables"),
		store: catchup.NewStore(co, catchup.StoreOptions{})}
	p := catchup.DefaultPolicy()
	p.Enabled, p.OwnedTargets, p.ThresholdGenerations = true, []string{"t"}, 1
	if s.m, err = catchup.OpenMaster(ctx, s.store, p, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := catchup.NewScanner(s.store, eng, watermarks.FromLance(s.root)).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := s.m.Admit(ctx, catchup.Request{Target: "t", Source: "api"})
	if err != nil || a.Decision != catchup.DecisionReserved {
		t.Fatalf("admit: %+v %v", a, err)
	}
	s.job = *a.JobID
	return s
}

// execute runs an executor for job with adm as its admission (one batch is
// one generation), the way `walctl catchup run` wires it.
func (s *stack) execute(job string, adm Admission) (*Report, error) {
	s.t.Helper()
	ex, err := New(Config{Table: "t", JobID: job}, adm)
	if err != nil {
		s.t.Fatal(err)
	}
	pub := publish.New(s.log, s.co, publish.Config{LanceRoot: s.root, Limits: publish.Limits{MaxGenerations: 1},
		Owner: coord.Owner{ID: "exec-" + job, Kind: coord.OwnerCatchup, JobID: job}, CommitGuard: ex.Guard})
	sess, err := pub.Acquire(s.ctx, "t")
	if err != nil {
		return &Report{Outcome: Classify(err, OutcomeFailed)}, err
	}
	return ex.Run(s.ctx, sess, s.log)
}

// watermark is shard 0's published position: one entry per generation, so
// it counts the batches committed.
func (s *stack) watermark() uint64 {
	s.t.Helper()
	wm, err := watermarks.FromLance(s.root)(s.ctx, "t")
	if err != nil {
		s.t.Fatal(err)
	}
	return wm[0]
}

// cancelAfter wraps the real store: after the n-th recorded progress event
// the master cancels (the real CAS), before the executor's next commit.
type cancelAfter struct {
	*catchup.Store
	m *catchup.Master
	n int
}

func (c *cancelAfter) RecordProgress(ctx context.Context, table string, execID uint64, kind catchup.ProgressKind) (uint64, error) {
	seq, err := c.Store.RecordProgress(ctx, table, execID, kind)
	if err == nil && int(seq) == c.n {
		if cerr := c.m.Cancel(ctx, table, "test", "test"); cerr != nil {
			return seq, cerr
		}
	}
	return seq, err
}

// On the real stack: the admitted Job catches up with progress recorded per
// batch and commit; a wrong Job cannot claim; a cancellation between a
// batch and its commit stops the executor before that commit, and the
// prepared batch is left pinned for whoever publishes next.
func TestRealStackCancelBeforeCommit(t *testing.T) {
	s := newStack(t, 4)

	if rep, err := s.execute("walctl-catchup-other-1", s.store); !errors.Is(err, coord.ErrReserved) || rep.Outcome != OutcomeWrongExecution {
		t.Fatalf("a foreign job: %v, outcome %s; want ErrReserved / wrong_execution", err, rep.Outcome)
	}

	// Events: batch 1, commit 1, batch 2 → cancelled before commit 2.
	rep, err := s.execute(s.job, &cancelAfter{Store: s.store, m: s.m, n: 3})
	if !errors.Is(err, catchup.ErrAdmissionClosed) || rep.Outcome != OutcomeAdmissionClosed {
		t.Fatalf("err %v outcome %s; want admission closed", err, rep.Outcome)
	}
	if rep.ProgressBatches != 2 || rep.ProgressCommits != 1 || len(rep.Batches) != 1 {
		t.Fatalf("report %+v: want 2 batches recorded and 1 commit", rep)
	}
	if got := s.watermark(); got != 1 {
		t.Fatalf("watermark %d after the cancellation, want 1 (the second batch must not be committed)", got)
	}
	st, err := s.store.Status(s.ctx, "t")
	if err != nil || st.Progress == nil || st.Progress.Seq != 3 || st.Progress.AdmissionOpen || !st.TerminationRequested {
		t.Fatalf("status %+v %v: want seq 3, admission closed, termination requested", st.Progress, err)
	}

	// The second batch stays pinned (its files prepared) for the next owner.
	ds, err := lance.Open(filepath.Join(s.root, "t.lance"))
	if err != nil {
		t.Fatal(err)
	}
	plans, err := publish.NewStore(ds.Root()).Plans()
	if err != nil || len(plans) != 1 || plans[0].Start[0] != 1 {
		t.Fatalf("pinned plans %v %v: want the second batch's plan starting after 1", plans, err)
	}
}

// damageFirst removes the files of the first batch it prepares, so that
// the round's verification retires that attempt and prepares it again
// (rule 7) — the case the cache serves without reading the WAL again.
type damageFirst struct {
	Session
	t    *testing.T
	dir  string
	done bool
}

func (d *damageFirst) Prepare(ctx context.Context) (*publish.Result, error) {
	res, err := d.Session.Prepare(ctx)
	if err != nil || d.done || len(res.Files) == 0 {
		return res, err
	}
	d.done = true
	for _, f := range res.Files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(d.dir, f)
		}
		if err := os.Remove(f); err != nil {
			d.t.Fatal(err)
		}
	}
	return res, nil
}

// On the real stack with the executor's memory (one budget of merge buffer
// + cache): a batch whose prepared files fail verification is prepared
// again from the cache — its entries are hits, the WAL is not read for
// them — and every batch is published; the cache stays within its bytes
// and returns every byte to the budget when closed.
func TestRealStackCacheServesARepreparedBatch(t *testing.T) {
	s := newStack(t, 4)
	mem := NewMemory(64<<20, 1<<20)
	ex, err := New(Config{Table: "t", JobID: s.job, Cache: mem.Cache}, s.store)
	if err != nil {
		t.Fatal(err)
	}
	pub := publish.New(s.log, s.co, publish.Config{LanceRoot: s.root, Limits: publish.Limits{MaxGenerations: 1},
		Owner: coord.Owner{ID: "exec-" + s.job, Kind: coord.OwnerCatchup, JobID: s.job}, CommitGuard: ex.Guard,
		Budget: mem.Budget, Cache: mem.Cache})
	sess, err := pub.Acquire(s.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ex.Run(s.ctx, &damageFirst{Session: sess, t: t, dir: filepath.Join(s.root, "t.lance")}, s.log)
	if err != nil || rep.Outcome != OutcomeCaughtUp {
		t.Fatalf("run: %v, outcome %s", err, rep.Outcome)
	}
	if got := s.watermark(); got != 4 || rep.Rows != 400 {
		t.Fatalf("watermark %d, %d rows: want all 4 batches (400 rows) published", got, rep.Rows)
	}
	c := rep.Cache
	if c == nil || c.Hits != 1 || c.Misses != 4 || c.PeakBytes > c.MaxBytes || c.HitRate != 0.2 {
		t.Fatalf("cache %+v: want the re-prepared batch's one entry as a hit, the 4 entries read once", c)
	}
	mem.Cache.Close()
	if r := mem.Budget.Reserved(); r != 0 {
		t.Fatalf("%d bytes still reserved after the run and Close", r)
	}
}

// cancelAfterBegin wraps the real store: the master cancels the admission
// right after the execution has begun, before the executor's first round.
type cancelAfterBegin struct {
	*catchup.Store
	m *catchup.Master
}

func (c *cancelAfterBegin) BeginExecution(ctx context.Context, table, jobID string) (catchup.Execution, error) {
	x, err := c.Store.BeginExecution(ctx, table, jobID)
	if err == nil {
		err = c.m.Cancel(ctx, table, "test", "test")
	}
	return x, err
}

// Issue 31: an execution's fence commit is guarded by the admission check
// like its data commits (rule 15): cancelled before its first round, the
// executor fences nothing.
func TestRealStackCancelBeforeFence(t *testing.T) {
	s := newStack(t, 2)
	rep, err := s.execute(s.job, &cancelAfterBegin{Store: s.store, m: s.m})
	if !errors.Is(err, catchup.ErrAdmissionClosed) || rep.Outcome != OutcomeAdmissionClosed {
		t.Fatalf("err %v outcome %s; want admission closed", err, rep.Outcome)
	}
	ds, err := lance.Open(filepath.Join(s.root, "t.lance"))
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return // nothing was committed at all
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := publish.ParseState(m.Config); err != nil || st.Epoch != 0 {
		t.Fatalf("version %d carries epoch %d (%v): the executor fenced after its admission was closed", m.Version, st.Epoch, err)
	}
}
