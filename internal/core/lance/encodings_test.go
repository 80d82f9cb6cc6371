package lance

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

// shapes are data shapes that lead the official writer to each of its
// encodings: varied values (bit-packing of integers, FSST of strings
// beyond 32 KiB, general compression of large blocks), one constant value
// (constant / RLE), long runs (RLE) and few distinct values (dictionary).
// A shape maps a row to the row whose value it holds; nulls stay where
// isNullRow puts them.
var shapes = []struct {
	suffix string
	row    func(int) int
}{
	{"", func(r int) int { return r }},
	{"_k", func(int) int { return 5 }},
	{"_r", func(r int) int { return r / 500 }},
	{"_d", func(r int) int { return r % 6 }},
	// Nothing but nulls (nullable fields only).
	{"_x", func(int) int { return -1 }},
	// General compression, which the official writer applies when a
	// field's metadata asks for it.
	{"_zstd", func(r int) int { return r }},
	{"_lz4", func(r int) int { return r }},
}

// compressedFields are the fields that also get the _zstd and _lz4
// shapes: one of each physical kind.
var compressedFields = map[string]bool{"i64": true, "f64": true, "s": true, "lbin": true, "v32": true, "fsb": true, "blob": true}

// wideField reports whether f holds values of hundreds of bytes, which
// get only the varied and all-null shapes to keep the dumps small.
func wideField(name string) bool {
	for _, w := range []string{"wide", "wfsb", "blob", "lblob"} {
		if strings.TrimSuffix(name, "_n") == w {
			return true
		}
	}
	return false
}

// shapedTypes is allTypes with every column in every shape, and the
// allTypes field (its type, nullable or not) each column comes from.
func shapedTypes() (*arrow.Schema, map[string]string) {
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	origin := map[string]string{"id": "id"}
	for _, f := range allTypes().Fields()[1:] {
		for _, sh := range shapes {
			scheme, compressed := strings.CutPrefix(sh.suffix, "_")
			compressed = compressed && len(scheme) > 1
			switch {
			case compressed && !compressedFields[strings.TrimSuffix(f.Name, "_n")]:
				continue
			case sh.suffix == "_x" && (!f.Nullable || f.Type.ID() == arrow.BOOL):
				// An all-null boolean column loses its validity bitmap on
				// its way from Arrow JS to LanceDB's native code, which
				// then refuses it ("Need at least 375 bytes for bitmap").
				continue
			case !compressed && wideField(f.Name) && sh.suffix != "" && sh.suffix != "_x":
				continue
			}
			origin[f.Name+sh.suffix] = f.Name
			field := arrow.Field{Name: f.Name + sh.suffix, Type: f.Type, Nullable: f.Nullable}
			if compressed {
				field.Metadata = arrow.NewMetadata([]string{"lance-encoding:compression"}, []string{scheme})
			}
			fields = append(fields, field)
		}
	}
	return arrow.NewSchema(fields, nil), origin
}

// shapedBatch builds rows [from, from+n) of shapedTypes and their cells.
func shapedBatch(s *arrow.Schema, from, n int) (arrow.Record, map[string][]any) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	want := map[string][]any{}
	for i, f := range s.Fields() {
		base, shape := f, shapes[0].row
		for _, sh := range shapes[1:] {
			if cut, ok := strings.CutSuffix(f.Name, sh.suffix); ok {
				base.Name, shape = cut, sh.row
			}
		}
		for row := from; row < from+n; row++ {
			var cell any
			if isNullRow(f, row) || shape(row) < 0 {
				b.Field(i).AppendNull()
			} else {
				base.Nullable = false
				cell = appendValue(b.Field(i), base, shape(row))
			}
			want[f.Name] = append(want[f.Name], cell)
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	// Arrow Go's builders leave an all-null boolean column without the
	// value bits the official writer checks for: make those columns whole.
	cols := make([]arrow.Array, len(s.Fields()))
	for i, f := range s.Fields() {
		cols[i] = rec.Column(i)
		if strings.HasSuffix(f.Name, "_x") {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
			defer cols[i].Release()
		}
	}
	return array.NewRecord(s, cols, int64(n)), want
}

// walctlCells scans version v (0: latest) with walctl and renders every
// value as the oracle does.
func walctlCells(t *testing.T, d *Dataset, v uint64) (map[string][]any, error) {
	t.Helper()
	out := map[string][]any{}
	err := d.Scan(testCtx(t), ScanOptions{Version: v}, func(r arrow.Record) error {
		for i, f := range r.Schema().Fields() {
			col := r.Column(i)
			for row := range col.Len() {
				out[f.Name] = append(out[f.Name], oracleCell(col, row))
			}
		}
		return nil
	})
	return out, err
}

// oracleCell renders one value of a walctl array the way oracle.js's
// cell() renders the official reader's.
func oracleCell(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return fmt.Sprint(c.Value(i))
	case *array.Uint64:
		return fmt.Sprint(c.Value(i))
	case *array.Float32:
		return float64(c.Value(i))
	case *array.Float16:
		return c.Value(i).Uint16()
	case *array.Date32:
		return fmt.Sprint(int64(c.Value(i)))
	case *array.Timestamp:
		return fmt.Sprint(int64(c.Value(i)))
	case *array.String:
		return c.Value(i)
	case *array.LargeString:
		return c.Value(i)
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(c.Value(i))
	case *array.LargeBinary:
		return base64.StdEncoding.EncodeToString(c.Value(i))
	case *array.FixedSizeBinary:
		return base64.StdEncoding.EncodeToString(c.Value(i))
	case *array.FixedSizeList:
		start, end := c.ValueOffsets(i)
		var items []any
		for k := start; k < end; k++ {
			items = append(items, oracleCell(c.ListValues(), int(k)))
		}
		return items
	}
	return a.GetOneForMarshal(i)
}

// TestWalctlReadsOfficialEncodings has the official writer write tables of
// every supported type, nullable and not, in every data shape, in file
// formats 2.0 and 2.1 with its default encodings, append to them and
// optimize() them; walctl must read every value of every version as the
// official reader does (and as generated).
func TestWalctlReadsOfficialEncodings(t *testing.T) {
	o := oracletest.MustFind(t)
	for _, fv := range []FileVersion{FileVersion2_0, FileVersion2_1} {
		t.Run(fv.String(), func(t *testing.T) { readsOfficialEncodings(t, o, fv) })
	}
}

func readsOfficialEncodings(t *testing.T, o *oracle.Oracle, fv FileVersion) {
	// Thousands of rows of a few hundred columns take the official reader
	// a while on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, origin := shapedTypes()
	root := t.TempDir() + "/t.lance"
	var want map[string][]any
	var appended uint64
	rows := 0
	// The compacted pages hold over 32 KiB of strings, which FSST needs.
	for i, n := range []int{1800, 1200, 400} {
		rec, w := shapedBatch(s, rows, n)
		defer rec.Release()
		var res *oracle.Result
		var err error
		if i == 0 {
			res, err = o.CreateRecords(ctx, root, []arrow.Record{rec}, fv.String())
		} else {
			res, err = o.AppendRecords(ctx, root, []arrow.Record{rec})
		}
		if err != nil {
			t.Fatal(err)
		}
		appended = res.Version
		want = mergeWant(want, w)
		rows += n
	}
	res, err := o.Optimize(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsRemoved < 2 {
		t.Fatalf("optimize removed %d fragments: nothing was rewritten", res.FragmentsRemoved)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	// Files the official writer appended (appended) and compacted.
	versions := []uint64{appended, res.Version}
	got := make([]map[string][]any, len(versions))
	dumps := make([]*oracle.Dump, len(versions))
	for i, v := range versions {
		if got[i], err = walctlCells(t, d, v); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if dumps[i], err = o.Dump(ctx, root, oracle.DumpOptions{Version: v}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range allTypes().Fields() {
		t.Run(f.Name, func(t *testing.T) {
			for i, v := range versions {
				walctl, generated := map[string][]any{}, map[string][]any{}
				for col, from := range origin {
					if from != f.Name {
						continue
					}
					walctl[col], generated[col] = got[i][col], want[col]
					if len(walctl[col]) != rows {
						t.Errorf("version %d: walctl read %d values of %q, want %d", v, len(walctl[col]), col, rows)
					}
				}
				sameColumns(t, dumps[i], walctl)
				sameColumns(t, dumps[i], generated)
			}
		})
	}
}
