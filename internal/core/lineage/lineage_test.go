package lineage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/stack"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

type env struct {
	t     *testing.T
	ctx   context.Context
	log   *wal.Engine
	co    *coord.Client
	lance string
	gen   *synth.Generator
}

func (e *env) produce(shard, n, rows int, seal bool) {
	for i := 0; i < n; i++ {
		b := e.gen.Batch(rows)
		if _, err := e.log.Append(e.ctx, "t", shard, b); err != nil {
			e.t.Fatal(err)
		}
		b.Release()
	}
	if !seal {
		return
	}
	if _, err := e.log.Seal(e.ctx, "t", shard); err != nil {
		e.t.Fatal(err)
	}
}

// publishAs publishes everything sealed with owner's identity.
func (e *env) publishAs(owner coord.Owner, execution func() string) {
	p := publish.New(e.log, e.co, publish.Config{LanceRoot: e.lance, Owner: owner, Execution: execution})
	s, err := p.Acquire(e.ctx, "t")
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Release(context.Background())
	for {
		r, err := s.Round(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.Outcome == publish.OutcomeIdle {
			return
		}
	}
}

func (e *env) locate(shard int, pos uint64) *Location {
	e.t.Helper()
	loc, err := Locate(e.ctx, e.log, objstore.NewLocal(e.lance), "t", shard, pos)
	if err != nil {
		e.t.Fatal(err)
	}
	return loc
}

// Issue 17: on a table built by a worker, a catch-up Job (its identity and
// execution, the claim taken under the Job's reservation) and an official
// append, history names each version's origin and locate says where WAL
// entries went, or that they were never published.
func TestHistoryAndLocateNameEachOrigin(t *testing.T) {
	o := oracletest.MustFind(t)
	st := stack.Start(t, 2*time.Minute, wal.Options{MaxGenerationAge: -1})
	e := &env{t: t, ctx: st.Ctx, log: st.WAL, co: st.Coord(t, coord.Config{ClaimTTL: 5 * time.Second}), lance: st.LanceRoot}
	if _, err := e.log.CreateTable(e.ctx, "t", schema, 2); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.gen, err = synth.New(schema, 5); err != nil {
		t.Fatal(err)
	}
	e.produce(0, 4, 10, true)
	e.publishAs(coord.Owner{ID: "worker-a", Kind: coord.OwnerWorker}, nil)

	res, _ := coord.MarshalReservation(coord.Reservation{Table: "t", JobID: "job-7"})
	if _, err := e.co.Etcd().Put(e.ctx, e.co.ReservationKey("t"), string(res)); err != nil {
		t.Fatal(err)
	}
	e.produce(1, 3, 10, true)
	e.publishAs(coord.Owner{ID: "catchup-x", Kind: coord.OwnerCatchup, JobID: "job-7"}, func() string { return "3" })
	if _, err := e.co.Etcd().Delete(e.ctx, e.co.ReservationKey("t")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Append(e.ctx, filepath.Join(e.lance, "t.lance"), []map[string]any{{"id": 900001, "body": "official"}}); err != nil {
		t.Fatal(err)
	}
	e.produce(0, 2, 10, false) // ACKed, not published

	vs, err := History(e.ctx, objstore.NewLocal(e.lance), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op, kind, job, exec string
		ranges              []publish.Range
		rows                int64
	}{
		{op: OpCreate},
		{op: OpFence, kind: coord.OwnerWorker},
		{op: OpPublication, kind: coord.OwnerWorker, ranges: []publish.Range{{Shard: 0, From: 1, To: 4}}, rows: 40},
		{op: OpFence, kind: coord.OwnerCatchup, job: "job-7", exec: "3"},
		{op: OpPublication, kind: coord.OwnerCatchup, job: "job-7", exec: "3", ranges: []publish.Range{{Shard: 1, From: 1, To: 3}}, rows: 30},
		{op: OpForeignAppend, rows: 1},
	}
	if len(vs) != len(want) {
		t.Fatalf("%d versions, want %d: %+v", len(vs), len(want), vs)
	}
	for i, w := range want {
		v := vs[i]
		c := v.Committer
		if v.Operation != w.op || v.Rows != w.rows || len(v.Ranges) != len(w.ranges) || (c == nil) != (w.kind == "") {
			t.Fatalf("version %d: %+v, want %+v", v.Version, v, w)
		}
		for j, r := range w.ranges {
			if g := v.Ranges[j]; g.Shard != r.Shard || g.From != r.From || g.To != r.To {
				t.Fatalf("version %d ranges %+v, want %+v", v.Version, v.Ranges, w.ranges)
			}
		}
		if c != nil && (c.Kind != w.kind || c.JobID != w.job || c.Execution != w.exec) {
			t.Fatalf("version %d committer %+v, want %+v", v.Version, c, w)
		}
		if w.rows > 0 && v.Bytes == 0 {
			t.Fatalf("version %d added %d rows in 0 bytes", v.Version, v.Rows)
		}
	}
	if lim, err := History(e.ctx, objstore.NewLocal(e.lance), "t", Options{Limit: 2}); err != nil || len(lim) != 2 || lim[1].Version != vs[5].Version {
		t.Fatalf("--limit 2: %+v %v", lim, err)
	}
	if late, err := History(e.ctx, objstore.NewLocal(e.lance), "t", Options{Since: vs[5].Time}); err != nil || len(late) == 0 || late[0].Version < vs[4].Version {
		t.Fatalf("--since: %+v %v", late, err)
	}

	for _, tc := range []struct {
		shard             int
		pos, version      uint64
		status, walStatus string
		firstRow          int64
	}{
		{0, 3, vs[2].Version, StatusPublished, "trimmed", 20},
		{1, 1, vs[4].Version, StatusPublished, "trimmed", 0},
		{0, 5, 0, StatusPending, "retained", -1},
		{0, 7, 0, StatusNeverWritten, "none", -1},
	} {
		loc := e.locate(tc.shard, tc.pos)
		if loc.Status != tc.status || loc.Version != tc.version || loc.WAL != tc.walStatus || loc.FirstRow != tc.firstRow {
			t.Fatalf("locate %d/%d: %+v, want %+v", tc.shard, tc.pos, loc, tc)
		}
		if tc.status == StatusPublished && (loc.File == "" || !loc.InLatest || loc.Rows != 10 || loc.Plan == "") {
			t.Fatalf("locate %d/%d: %+v", tc.shard, tc.pos, loc)
		}
	}

	// The official optimize() rewrites the fragments: a compaction with no
	// walctl committer (the keys it carries over are not its own), and the
	// published file is no longer in the latest version.
	if _, err := o.Optimize(e.ctx, filepath.Join(e.lance, "t.lance")); err != nil {
		t.Fatal(err)
	}
	after, err := History(e.ctx, objstore.NewLocal(e.lance), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rewrite *Version
	for i := range after[len(vs):] {
		if v := &after[len(vs)+i]; v.Operation == OpCompaction {
			rewrite = v
		}
	}
	if rewrite == nil || rewrite.Committer != nil || rewrite.Epoch != vs[5].Epoch || len(rewrite.Ranges) != 0 {
		t.Fatalf("official optimize: %+v", after[len(vs):])
	}
	if loc := e.locate(0, 3); loc.InLatest || loc.RewrittenIn == 0 || loc.Version != vs[2].Version {
		t.Fatalf("locate after optimize: %+v", loc)
	}
}
