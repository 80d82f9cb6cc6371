package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/publish"
)

// published is one row of the table as walctl published it: its content
// (as the official writer's add takes it) and the WAL entry it came from.
type publishedRow struct {
	values   map[string]any
	shard    int
	position uint64
}

// rowAt reads row off of the k-th fragment of the latest version and the
// WAL position its walctl file records for it.
func (e *env) rowAt(k int, off int64) publishedRow {
	e.t.Helper()
	r, err := publish.OpenReader(e.lance, "t", publish.Selection{})
	if err != nil {
		e.t.Fatal(err)
	}
	atts, err := publish.NewStore(filepath.Join(e.lance, "t.lance")).AllAttempts()
	if err != nil {
		e.t.Fatal(err)
	}
	frag := r.Manifest.Fragments[k]
	var out publishedRow
	for _, a := range atts {
		for _, f := range a.Files {
			if strings.TrimPrefix(f.Descriptor.Path, "data/") == frag.Files[0].Path {
				pos, ok := f.Lineage.Position(f.Range.From, off)
				if !ok {
					e.t.Fatalf("row %d beyond file %+v", off, f)
				}
				out.shard, out.position = f.Range.Shard, pos
			}
		}
	}
	i := 0
	err = r.Scan(e.ctx, nil, func(rec arrow.RecordBatch) error {
		if i++; i-1 != k {
			return nil
		}
		vec := rec.Column(2).(*array.FixedSizeList)
		items := vec.ListValues().(*array.Float32)
		v := make([]float32, 4)
		for j := range v {
			v[j] = items.Value(int(off)*4 + j)
		}
		body := any(nil)
		if b := rec.Column(1).(*array.String); b.IsValid(int(off)) {
			body = b.Value(int(off))
		}
		out.values = map[string]any{"id": rec.Column(0).(*array.Int64).Value(int(off)), "body": body, "vec": v}
		return nil
	})
	if err != nil || out.values == nil || out.position == 0 {
		e.t.Fatalf("row %d of fragment %d: %+v %v", off, k, out, err)
	}
	return out
}

// wantProblems checks that the report lists exactly the problems want
// (kind, shard, position), in any order.
func wantProblems(t *testing.T, rep *Report, want ...Problem) {
	t.Helper()
	if len(rep.Problems) != len(want) {
		t.Fatalf("problems %+v, want %d: %+v", rep.Problems, len(want), want)
	}
	for _, w := range want {
		found := false
		for _, p := range rep.Problems {
			found = found || p.Kind == w.Kind && p.Shard == w.Shard && p.From == w.From && p.To == w.From
		}
		if !found {
			t.Fatalf("no %s problem at shard %d position %d in %+v", w.Kind, w.Shard, w.From, rep.Problems)
		}
	}
	if rep.OK || !errors.Is(rep.Err(), errs.ErrCorrupt) {
		t.Fatalf("ok=%v err=%v", rep.OK, rep.Err())
	}
}

// Issue 17: after the WAL is trimmed, an official append of an
// already-published record and an official delete of a published row are
// reported exactly — the duplicate and the missing record, each with its
// shard and position — by the digests; the same on retained records by the
// WAL itself. The official writer makes both changes.
func TestAuditNamesOfficialDuplicateAndDelete(t *testing.T) {
	o := oracletest.MustFind(t)
	e := newEnv(t)
	e.produce(0, 6, 20)
	e.produce(1, 4, 20)
	e.publishAll(false) // trimmed
	rep := e.verify()
	if !rep.OK || rep.ComparedDigest != 200 || rep.ComparedWAL != 0 || rep.ForeignRows != 0 {
		t.Fatalf("clean: %+v", rep)
	}
	root := filepath.Join(e.lance, "t.lance")
	dup, gone := e.rowAt(0, 3), e.rowAt(1, 7)
	if _, err := o.Append(e.ctx, root, []map[string]any{dup.values}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(e.ctx, root, fmt.Sprintf("id = %d", gone.values["id"])); err != nil {
		t.Fatal(err)
	}
	sameAsOfficial(t, e, o.Dump, root, gone.values["id"].(int64))
	rep = e.verify()
	wantProblems(t, rep, Problem{Kind: KindDuplicated, Shard: dup.shard, From: dup.position},
		Problem{Kind: KindMissing, Shard: gone.shard, From: gone.position})
	if rep.Duplicated != 1 || rep.Missing != 1 || rep.ForeignRows != 1 || rep.DeletedRows != 1 || rep.TableRows != 200 || rep.ComparedDigest != 200 {
		t.Fatalf("trimmed: %+v", rep)
	}

	// Retained records: the WAL names them.
	e.produce(1, 3, 10)
	e.publishAll(true)
	k := len(mustLatest(t, e).Manifest.Fragments) - 1
	dup2, gone2 := e.rowAt(k, 0), e.rowAt(k, 9)
	if _, err := o.Append(e.ctx, root, []map[string]any{dup2.values}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(e.ctx, root, fmt.Sprintf("id = %d", gone2.values["id"])); err != nil {
		t.Fatal(err)
	}
	rep = e.verify()
	wantProblems(t, rep, Problem{Kind: KindDuplicated, Shard: dup.shard, From: dup.position},
		Problem{Kind: KindMissing, Shard: gone.shard, From: gone.position},
		Problem{Kind: KindDuplicated, Shard: dup2.shard, From: dup2.position},
		Problem{Kind: KindMissing, Shard: gone2.shard, From: gone2.position})
	if rep.ComparedWAL != 30 || rep.ForeignRows != 2 {
		t.Fatalf("retained: %+v", rep)
	}
}

func mustLatest(t *testing.T, e *env) *publish.Reader {
	t.Helper()
	r, err := publish.OpenReader(e.lance, "t", publish.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Issue 17: the official optimize() rewrites walctl's fragments (their
// lineage is gone from the version), then the official writer appends an
// already-published record and deletes a published row: the audit still
// reports exactly the duplicate and the missing record, with their shard and
// position (by digest, and by the content of the walctl files the
// compaction retired), and a clean optimized table passes.
func TestAuditAfterOfficialOptimize(t *testing.T) {
	o := oracletest.MustFind(t)
	e := newEnv(t)
	e.produce(0, 6, 20)
	e.produce(1, 4, 20)
	e.publishAll(false) // trimmed
	root := filepath.Join(e.lance, "t.lance")
	dup, gone := e.rowAt(0, 3), e.rowAt(1, 7)
	res, err := o.Optimize(e.ctx, root)
	if err != nil || res.FragmentsRemoved < 2 {
		t.Fatalf("optimize: %+v %v", res, err)
	}
	rep := e.verify()
	if !rep.OK || rep.ComparedDigest != 200 || rep.TableRows != 200 || rep.ForeignRows != 0 {
		t.Fatalf("clean optimized table: %+v", rep)
	}
	if _, err := o.Append(e.ctx, root, []map[string]any{dup.values}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(e.ctx, root, fmt.Sprintf("id = %d", gone.values["id"])); err != nil {
		t.Fatal(err)
	}
	rep = e.verify()
	wantProblems(t, rep, Problem{Kind: KindDuplicated, Shard: dup.shard, From: dup.position},
		Problem{Kind: KindMissing, Shard: gone.shard, From: gone.position})
	if rep.ForeignRows != 1 || rep.DeletedRows != 1 {
		t.Fatalf("optimized, appended, deleted: %+v", rep)
	}
}

// sameAsOfficial checks that walctl's reader, honouring the official
// writer's deletion file, returns the ids the official reader returns, and
// not the deleted one.
func sameAsOfficial(t *testing.T, e *env, dump func(context.Context, string, oracle.DumpOptions) (*oracle.Dump, error), root string, deleted int64) {
	t.Helper()
	d, err := dump(e.ctx, root, oracle.DumpOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int{}
	for _, raw := range d.Columns["id"] {
		id, err := oracle.ParseInt64(raw)
		if err != nil {
			t.Fatal(err)
		}
		want[id]++
	}
	got := map[int64]int{}
	err = mustLatest(t, e).Scan(e.ctx, []string{"id"}, func(rec arrow.RecordBatch) error {
		ids := rec.Column(0).(*array.Int64)
		for i := 0; i < ids.Len(); i++ {
			got[ids.Value(i)]++
		}
		return nil
	})
	if err != nil || !maps.Equal(got, want) || got[deleted] != 0 {
		t.Fatalf("walctl read %d distinct ids, the official reader %d (deleted id %d: %d): %v", len(got), len(want), deleted, got[deleted], err)
	}
}
