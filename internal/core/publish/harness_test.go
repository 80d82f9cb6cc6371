package publish

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/stack"
)

// env is one real setup: an embedded etcd, an in-process WAL engine and a
// Lance root, all in temporary directories.
type env struct {
	t     *testing.T
	ctx   context.Context
	co    *coord.Client
	log   *wal.Engine
	lance string
	gen   *synth.Generator
	acked map[int64]int // id → times ACKed
	// walDir and walOpts reopen the WAL engine (reopenWAL).
	walDir  string
	walOpts wal.Options
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(8, arrow.PrimitiveTypes.Float32)},
}, nil)

func newEnv(t *testing.T, shards int) *env {
	t.Helper()
	walOpts := wal.Options{MaxGenerationAge: -1, MaxGenerationBytes: 64 << 10}
	st := stack.Start(t, 3*time.Minute, walOpts)
	ctx, log := st.Ctx, st.WAL
	co := st.Coord(t, coord.Config{ClaimTTL: 5 * time.Second})
	if _, err := log.CreateTable(ctx, "orders", testSchema, shards); err != nil {
		t.Fatal(err)
	}
	gen, err := synth.New(testSchema, 7)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, co: co, log: log, lance: st.LanceRoot, gen: gen, acked: map[int64]int{},
		walDir: filepath.Join(st.Dir, "wal"), walOpts: walOpts}
}

// reopenWAL closes the WAL engine, lets change act on its directory (a
// backup, a restore), and opens it again.
func (e *env) reopenWAL(change func(dir string)) {
	e.t.Helper()
	if err := e.log.Close(); err != nil {
		e.t.Fatal(err)
	}
	change(e.walDir)
	log, err := wal.Open(e.walDir, e.walOpts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { log.Close() })
	e.log = log
}

// produce appends n batches of rows records to shard and seals it.
func (e *env) produce(shard, n, rows int) {
	e.t.Helper()
	e.appendOpen(shard, n, rows)
	if _, err := e.log.Seal(e.ctx, "orders", shard); err != nil {
		e.t.Fatal(err)
	}
}

// appendOpen appends n batches of rows records to shard, unsealed.
func (e *env) appendOpen(shard, n, rows int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		b := e.gen.Batch(rows)
		if _, err := e.log.Append(e.ctx, "orders", shard, b); err != nil {
			e.t.Fatal(err)
		}
		ids := b.Column(0).(*array.Int64)
		for j := 0; j < ids.Len(); j++ {
			e.acked[ids.Value(j)]++
		}
		b.Release()
	}
}

func (e *env) publisher(owner string) *Publisher {
	return New(e.log, e.co, Config{
		LanceRoot: e.lance,
		Owner:     coord.Owner{ID: owner, Kind: coord.OwnerWorker, Host: "test", PID: os.Getpid()},
		Limits:    Limits{MaxBytes: 1 << 30, MaxGenerations: 1000, FileBytes: 128 << 10},
	})
}

// tableIDs reads every id of the table's latest version with walctl's reader.
func (e *env) tableIDs() []int64 {
	e.t.Helper()
	return e.tableIDsOn(objstore.NewLocal(e.lance))
}

// tableIDsOn reads every id of the latest version of the table under the
// lance root store.
func (e *env) tableIDsOn(root objstore.Store) []int64 {
	e.t.Helper()
	r, err := OpenReaderOn(root, "orders", Selection{})
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
	return ids
}

// exactlyOnce checks that ids holds every ACKed id exactly once and nothing else.
func (e *env) exactlyOnce(ids []int64) {
	e.t.Helper()
	seen := map[int64]int{}
	for _, id := range ids {
		seen[id]++
	}
	for id, n := range seen {
		if n != 1 {
			e.t.Fatalf("id %d appears %d times", id, n)
		}
		if e.acked[id] == 0 {
			e.t.Fatalf("id %d in the table was never ACKed", id)
		}
	}
	for id := range e.acked {
		if seen[id] == 0 {
			e.t.Fatalf("ACKed id %d missing from the table (have %d of %d)", id, len(seen), len(e.acked))
		}
	}
}

// drain runs rounds until one is idle.
func drain(t *testing.T, ctx context.Context, s *Session) []*Result {
	t.Helper()
	var out []*Result
	for i := 0; i < 100; i++ {
		r, err := s.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		if r.Outcome == OutcomeIdle {
			return out
		}
	}
	t.Fatal("never idle")
	return nil
}

func sortedIDs(ids []int64) []int64 { s := slices.Clone(ids); slices.Sort(s); return s }
