package lance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

// small is the schema the interop tests share with the oracle's spec types.
var small = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
}, nil)

var smallSpec = []map[string]any{
	{"name": "id", "type": "int64", "nullable": false},
	{"name": "name", "type": "utf8", "nullable": true},
	{"name": "vec", "type": "fsl_f32:4", "nullable": true},
}

func smallBatch(from, n int) arrow.Record {
	rec, _ := batch(small, from, n)
	return rec
}

func smallRows(from, n int) []map[string]any {
	var rows []map[string]any
	for i := from; i < from+n; i++ {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("official-%d", i), "vec": []float32{1, 2, 3, float32(i)}})
	}
	return rows
}

// smallCells returns the canonical cells of smallRows(from, n).
func smallCells(from, n int) map[string][]any {
	want := map[string][]any{}
	for i := from; i < from+n; i++ {
		want["id"] = append(want["id"], fmt.Sprint(i))
		want["name"] = append(want["name"], fmt.Sprintf("official-%d", i))
		want["vec"] = append(want["vec"], []any{1.0, 2.0, 3.0, float64(i)})
	}
	return want
}

// walctlDump scans the latest version of a table of schema small with
// walctl and renders it like the oracle's dump.
func walctlDump(t *testing.T, d *Dataset) *oracle.Dump {
	t.Helper()
	out := &oracle.Dump{Columns: map[string][]json.RawMessage{}}
	cell := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Columns[name] = append(out.Columns[name], b)
	}
	err := d.Scan(context.Background(), ScanOptions{}, func(r arrow.Record) error {
		ids := r.Column(0).(*array.Int64)
		names := r.Column(1).(*array.String)
		vecs := r.Column(2).(*array.FixedSizeList)
		items := vecs.ListValues().(*array.Float32)
		for i := range int(r.NumRows()) {
			cell("id", fmt.Sprint(ids.Value(i)))
			if names.IsNull(i) {
				cell("name", nil)
			} else {
				cell("name", names.Value(i))
			}
			if vecs.IsNull(i) {
				cell("vec", nil)
				continue
			}
			start, end := vecs.ValueOffsets(i)
			var v []float64
			for k := start; k < end; k++ {
				v = append(v, float64(items.Value(int(k))))
			}
			cell("vec", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// walctlIDs scans the latest version with walctl and returns the sorted ids.
func walctlIDs(t *testing.T, d *Dataset) []int64 {
	t.Helper()
	var ids []int64
	err := d.Scan(context.Background(), ScanOptions{Columns: []string{"id"}}, func(r arrow.Record) error {
		ids = append(ids, r.Column(0).(*array.Int64).Int64Values()...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func oracleIDs(t *testing.T, o *oracle.Oracle, root string) []int64 {
	t.Helper()
	dump, err := o.Dump(testCtx(t), root, oracle.DumpOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, raw := range dump.Columns["id"] {
		s, _ := strconv.Unquote(string(raw))
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("id %s: %v", raw, err)
		}
		ids = append(ids, v)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) != dump.CountRows {
		t.Fatalf("oracle returned %d ids but counts %d rows", len(ids), dump.CountRows)
	}
	return ids
}

// wantIDs checks ids are exactly 0..n-1, each once.
func wantIDs(t *testing.T, who string, ids []int64, n int) {
	t.Helper()
	if len(ids) != n {
		t.Fatalf("%s: %d rows, want %d", who, len(ids), n)
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("%s: row %d has id %d: lost or duplicated rows", who, i, id)
		}
	}
}

// The official writer appends to a walctl table, walctl appends again, and
// both read every row and value; then official compaction keeps every row
// and walctl keeps appending. In 2.1 the official append of a few rows is
// left uncompressed by the official writer, so walctl reads it all.
func TestOfficialAppendsToWalctlTableThenWalctlAppends(t *testing.T) {
	o := oracletest.MustFind(t)
	for _, fv := range []FileVersion{FileVersion2_0, FileVersion2_1} {
		t.Run(fv.String(), func(t *testing.T) { officialAppendsThenWalctl(t, o, fv) })
	}
}

func officialAppendsThenWalctl(t *testing.T, o *oracle.Oracle, fv FileVersion) {
	ctx := testCtx(t)
	d := newDataset(t, small, fv)
	r, want := batch(small, 0, 50)
	defer r.Release()
	appendFiles(t, d, map[string]string{"walctl.epoch": "1"}, writeFile(t, d, r))

	if _, err := o.Append(ctx, d.Root(), smallRows(50, 25)); err != nil {
		t.Fatal(err)
	}
	want = mergeWant(want, smallCells(50, 25))
	m, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 3 || m.Config["walctl.epoch"] != "1" || m.DataFormat != fv.String() {
		t.Fatalf("after official append: version %d format %s config %v", m.Version, m.DataFormat, m.Config)
	}
	r2, want2 := batch(small, 75, 30)
	defer r2.Release()
	want = mergeWant(want, want2)
	res := appendFiles(t, d, nil, writeFile(t, d, r2))
	if res.Version != 4 || res.FragmentIDs[0] != 2 {
		t.Fatalf("walctl append after official: version %d fragment ids %v", res.Version, res.FragmentIDs)
	}
	wantIDs(t, "walctl", walctlIDs(t, d), 105)
	wantIDs(t, "official", oracleIDs(t, o, d.Root()), 105)
	dump, err := o.Dump(ctx, d.Root(), oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameColumns(t, dump, want)
	sameColumns(t, walctlDump(t, d), want)

	opt, err := o.Optimize(ctx, d.Root())
	if err != nil {
		t.Fatal(err)
	}
	if opt.CountRows != 105 {
		t.Fatalf("after optimize the official reader counts %d rows", opt.CountRows)
	}
	wantIDs(t, "official after optimize", oracleIDs(t, o, d.Root()), 105)
	latest, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version <= 4 || latest.Config["walctl.epoch"] != "1" {
		t.Fatalf("after optimize: version %d config %v", latest.Version, latest.Config)
	}
	// walctl reads the columns official compaction left plain (ids); a
	// column it compressed is refused with an error naming file and column.
	wantIDs(t, "walctl after optimize", walctlIDs(t, d), 105)
	for _, col := range []string{"name", "vec"} {
		err = d.Scan(ctx, ScanOptions{Columns: []string{col}}, func(arrow.Record) error { return nil })
		if err != nil && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), fmt.Sprintf("column %q", col))) {
			t.Fatalf("walctl scan of %s after official optimize: %v", col, err)
		}
		t.Logf("walctl scan of compacted %s: %v", col, err)
	}
	// And walctl keeps appending on top of the compacted version.
	r3 := smallBatch(105, 5)
	defer r3.Release()
	appendFiles(t, d, nil, writeFile(t, d, r3))
	wantIDs(t, "official after walctl append on compacted", oracleIDs(t, o, d.Root()), 110)
}

func TestWalctlAppendsToOfficialTable(t *testing.T) {
	o := oracletest.MustFind(t)
	ctx := testCtx(t)
	root := t.TempDir() + "/official.lance"
	if _, err := o.Create(ctx, root, map[string]any{"schema": smallSpec, "rows": smallRows(0, 40)}, "2.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Append(ctx, root, smallRows(40, 10)); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 || !vs[1].V2Naming {
		t.Fatalf("versions of an official table: %+v", vs)
	}
	m, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if m.WriterLibrary != "lance" || m.DataFormat != "2.0" || m.Timestamp.IsZero() || len(m.Fragments) != 2 || len(m.Config) != 0 {
		t.Fatalf("official manifest: writer %s, format %s, time %v, %d fragments, config %v", m.WriterLibrary, m.DataFormat, m.Timestamp, len(m.Fragments), m.Config)
	}
	txn, ok, err := m.Transaction(d.Store())
	if err != nil || !ok || txn.Operation != "append" || txn.ReadVersion != 1 {
		t.Fatalf("official transaction: %+v %v %v", txn, ok, err)
	}
	wantIDs(t, "walctl reading official", walctlIDs(t, d), 50)

	r := smallBatch(50, 20)
	defer r.Release()
	res := appendFiles(t, d, map[string]string{"walctl.watermark.0": "70"}, writeFile(t, d, r))
	if res.Version != 3 {
		t.Fatalf("walctl commit on official table made version %d", res.Version)
	}
	wantIDs(t, "official", oracleIDs(t, o, root), 70)
	wantIDs(t, "walctl", walctlIDs(t, d), 70)
	if _, err := o.Append(ctx, root, smallRows(70, 5)); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "official after official append on walctl commit", oracleIDs(t, o, root), 75)
	m, err = d.Latest()
	if err != nil || m.Config["walctl.watermark.0"] != "70" {
		t.Fatalf("config after official append: %v %v", m.Config, err)
	}
}

// An official table in its default 2.1 format: walctl reads its versions,
// schema and config, refuses its compressed pages by name, and appends 2.1
// files the official reader reads in full.
func TestOfficialDefault21Table(t *testing.T) {
	o := oracletest.MustFind(t)
	ctx := testCtx(t)
	root := t.TempDir() + "/official21.lance"
	if _, err := o.Create(ctx, root, map[string]any{"schema": smallSpec, "rows": smallRows(0, 300)}, ""); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if m.DataFormat != "2.1" || m.Rows() != 300 {
		t.Fatalf("official default: format %q rows %d", m.DataFormat, m.Rows())
	}
	s, err := m.Schema()
	if err != nil || !s.Arrow.Equal(small) {
		t.Fatalf("schema %v (%v), want %v", s, err, small)
	}
	// The official writer compresses its pages (bit-packed ids, FSST or
	// dictionary strings): walctl reads every value as the official
	// reader does.
	readsAsOfficial := func(when string) {
		t.Helper()
		cells, err := walctlCells(t, d, 0)
		if err != nil {
			t.Fatalf("%s: walctl scan of official 2.1 pages: %v", when, err)
		}
		dump, err := o.Dump(ctx, root, oracle.DumpOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cells["id"]) != dump.CountRows {
			t.Fatalf("%s: walctl read %d rows, the official reader %d", when, len(cells["id"]), dump.CountRows)
		}
		sameColumns(t, dump, cells)
	}
	readsAsOfficial("before walctl append")

	r, want := batch(small, 300, 40)
	defer r.Release()
	desc := writeFile(t, d, r)
	if desc.FileMajor != 2 || desc.FileMinor != 1 {
		t.Fatalf("walctl wrote format %d.%d into a 2.1 table", desc.FileMajor, desc.FileMinor)
	}
	res := appendFiles(t, d, map[string]string{"walctl.watermark.0": "340"}, desc)
	if res.Version != 2 {
		t.Fatalf("walctl commit on official 2.1 table made version %d", res.Version)
	}
	wantIDs(t, "official", oracleIDs(t, o, root), 340)
	got, err := o.Dump(ctx, root, oracle.DumpOptions{Filter: "id >= 300"})
	if err != nil {
		t.Fatal(err)
	}
	if got.CountRows != 40 {
		t.Fatalf("official reader sees %d walctl rows, want 40", got.CountRows)
	}
	sameColumns(t, got, want)
	if _, err := o.Append(ctx, root, smallRows(340, 5)); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "official after official append on walctl commit", oracleIDs(t, o, root), 345)
	if m, err = d.Latest(); err != nil || m.Config["walctl.watermark.0"] != "340" || m.Rows() != 345 {
		t.Fatalf("after official append: %v rows, config %v, %v", m.Rows(), m.Config, err)
	}
	readsAsOfficial("after walctl append")
}
