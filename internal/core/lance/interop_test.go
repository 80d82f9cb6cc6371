package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance/oracle"
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

func TestOfficialAppendsToWalctlTableThenWalctlAppends(t *testing.T) {
	o := oracle.MustFind(t)
	ctx := testCtx(t)
	d := newDataset(t, small, FileVersion2_0)
	r := smallBatch(0, 50)
	defer r.Release()
	appendFiles(t, d, map[string]string{"walctl.epoch": "1"}, writeFile(t, d, r))

	if _, err := o.Append(ctx, d.Root(), smallRows(50, 25)); err != nil {
		t.Fatal(err)
	}
	m, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 3 || m.Config["walctl.epoch"] != "1" {
		t.Fatalf("after official append: version %d config %v", m.Version, m.Config)
	}
	r2 := smallBatch(75, 30)
	defer r2.Release()
	res := appendFiles(t, d, nil, writeFile(t, d, r2))
	if res.Version != 4 || res.FragmentIDs[0] != 2 {
		t.Fatalf("walctl append after official: version %d fragment ids %v", res.Version, res.FragmentIDs)
	}
	wantIDs(t, "walctl", walctlIDs(t, d), 105)
	wantIDs(t, "official", oracleIDs(t, o, d.Root()), 105)

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
	// walctl reads the plain columns official compaction wrote; a column it
	// dictionary-encoded is refused with an error naming file and column.
	var ids []int64
	err = d.Scan(ctx, ScanOptions{Columns: []string{"id", "vec"}}, func(r arrow.Record) error {
		ids = append(ids, r.Column(0).(*array.Int64).Int64Values()...)
		return nil
	})
	if err != nil || len(ids) != 105 {
		t.Fatalf("walctl scan of id, vec after official optimize: %d rows, %v", len(ids), err)
	}
	err = d.Scan(ctx, ScanOptions{}, func(arrow.Record) error { return nil })
	if err != nil && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `column "name"`)) {
		t.Fatalf("walctl full scan after optimize: %v", err)
	}
	// And walctl keeps appending on top of the compacted version.
	r3 := smallBatch(105, 5)
	defer r3.Release()
	appendFiles(t, d, nil, writeFile(t, d, r3))
	wantIDs(t, "official after walctl append on compacted", oracleIDs(t, o, d.Root()), 110)
}

func TestWalctlAppendsToOfficialTable(t *testing.T) {
	o := oracle.MustFind(t)
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
	txn, ok, err := m.Transaction(d.Root())
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
// schema and config, and refuses its compressed pages by name.
func TestOfficialDefault21Table(t *testing.T) {
	o := oracle.MustFind(t)
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
	err = d.Scan(ctx, ScanOptions{}, func(arrow.Record) error { return nil })
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("scan of official 2.1 pages: %v, want ErrUnsupported", err)
	}
	t.Logf("refusal reads: %v", err)
}
