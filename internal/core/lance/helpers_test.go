package lance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// allTypes is one field of every supported type, nullable and not.
func allTypes() *arrow.Schema {
	base := []arrow.Field{
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f16", Type: arrow.FixedWidthTypes.Float16},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "bin", Type: arrow.BinaryTypes.Binary},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 5}},
		{Name: "v16", Type: arrow.FixedSizeListOf(3, arrow.FixedWidthTypes.Float16)},
		{Name: "v32", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
		{Name: "vi8", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int8)},
		{Name: "vu8", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Uint8)},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts_s", Type: &arrow.TimestampType{Unit: arrow.Second}},
		{Name: "ts_ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "ts_us", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Europe/Paris"}},
		{Name: "ts_off", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "+0530"}},
		// Values of 256 bytes and more: file format 2.1 stores them in
		// full-zip pages (blob and lblob mix in short values).
		{Name: "wide", Type: arrow.FixedSizeListOf(64, arrow.PrimitiveTypes.Float32)},
		{Name: "wfsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 260}},
		{Name: "blob", Type: arrow.BinaryTypes.Binary},
		{Name: "lblob", Type: arrow.BinaryTypes.LargeBinary},
	}
	var fields []arrow.Field
	fields = append(fields, arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64})
	for _, f := range base {
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type})
		fields = append(fields, arrow.Field{Name: f.Name + "_n", Type: f.Type, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

func isNullRow(f arrow.Field, row int) bool { return f.Nullable && row%7 == 3 }

// value returns the canonical JSON cell of field f at row (as the oracle
// renders it) and appends it to b.
func appendValue(b array.Builder, f arrow.Field, row int) any {
	if isNullRow(f, row) {
		b.AppendNull()
		return nil
	}
	r := int64(row)
	switch bb := b.(type) {
	case *array.Int64Builder:
		v := r*1_000_003 - 5_000_000_000
		if f.Name == "id" {
			v = r
		}
		bb.Append(v)
		return fmt.Sprint(v)
	case *array.BooleanBuilder:
		bb.Append(row%3 == 0)
		return row%3 == 0
	case *array.Int8Builder:
		bb.Append(int8(r%200 - 100))
		return r%200 - 100
	case *array.Int16Builder:
		bb.Append(int16(r*7 - 300))
		return int64(int16(r*7 - 300))
	case *array.Int32Builder:
		bb.Append(int32(r*70001 - 1000000))
		return r*70001 - 1000000
	case *array.Uint8Builder:
		bb.Append(uint8(r % 256))
		return r % 256
	case *array.Uint16Builder:
		bb.Append(uint16(r * 11))
		return int64(uint16(r * 11))
	case *array.Uint32Builder:
		bb.Append(uint32(r * 4000001))
		return int64(uint32(r * 4000001))
	case *array.Uint64Builder:
		v := uint64(r)*1_000_000_007 + 1<<63
		bb.Append(v)
		return fmt.Sprint(v)
	case *array.Float16Builder:
		v := float16.New(float32(r) / 4)
		bb.Append(v)
		return v.Uint16()
	case *array.Float32Builder:
		v := float32(r) / 3
		bb.Append(v)
		return float64(v)
	case *array.Float64Builder:
		v := float64(r) / 7
		bb.Append(v)
		return v
	case *array.StringBuilder:
		v := fmt.Sprintf("str-%d-é", r)
		if row%5 == 1 {
			v = ""
		}
		bb.Append(v)
		return v
	case *array.LargeStringBuilder:
		v := fmt.Sprintf("large-%d-日本-🦀", r*r)
		bb.Append(v)
		return v
	case *array.BinaryBuilder:
		v := []byte(fmt.Sprintf("\x00bin\xff%d", r))
		if bb.Type().ID() == arrow.LARGE_BINARY {
			v = append(v, v...)
		}
		if strings.Contains(f.Name, "blob") && row%4 != 1 {
			v = bytes.Repeat(v, 300/len(v)+row%3)
		}
		bb.Append(v)
		return base64.StdEncoding.EncodeToString(v)
	case *array.FixedSizeBinaryBuilder:
		v := make([]byte, bb.Type().(*arrow.FixedSizeBinaryType).ByteWidth)
		for k := range v {
			v[k] = byte(k + 1)
		}
		v[0], v[len(v)-1] = byte(r), byte(r>>8)
		bb.Append(v)
		return base64.StdEncoding.EncodeToString(v)
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		dim := int(bb.Type().(*arrow.FixedSizeListType).Len())
		out := make([]any, dim)
		for k := range dim {
			switch vb := bb.ValueBuilder().(type) {
			case *array.Float16Builder:
				v := float16.New(float32(row*dim+k) / 2)
				vb.Append(v)
				out[k] = v.Uint16()
			case *array.Float32Builder:
				v := float32(row*dim+k) * 0.25
				vb.Append(v)
				out[k] = float64(v)
			case *array.Int8Builder:
				v := int8((row*dim + k) % 100)
				vb.Append(v)
				out[k] = int64(v)
			case *array.Uint8Builder:
				v := uint8((row*dim + k) % 250)
				vb.Append(v)
				out[k] = int64(v)
			}
		}
		return out
	case *array.Date32Builder:
		v := arrow.Date32(19000 + row)
		bb.Append(v)
		return fmt.Sprint(int64(v))
	case *array.TimestampBuilder:
		v := arrow.Timestamp(1_700_000_000_000 + r*1_000_001)
		bb.Append(v)
		return fmt.Sprint(int64(v))
	}
	panic(fmt.Sprintf("no generator for %T", b))
}

// batch builds rows [from, from+n) of schema s and the expected cells.
func batch(s *arrow.Schema, from, n int) (arrow.Record, map[string][]any) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	want := map[string][]any{}
	for i, f := range s.Fields() {
		for row := from; row < from+n; row++ {
			want[f.Name] = append(want[f.Name], appendValue(b.Field(i), f, row))
		}
	}
	return b.NewRecord(), want
}

// writeFile writes recs into one new data file of d.
func writeFile(t testing.TB, d *Dataset, recs ...arrow.Record) Descriptor {
	t.Helper()
	return writeFilePages(t, d, 0, recs...)
}

// writeFilePages writes recs into one new data file of d in the table's
// format with pages of at most maxPage bytes (the default if 0).
func writeFilePages(t testing.TB, d *Dataset, maxPage int, recs ...arrow.Record) Descriptor {
	t.Helper()
	m, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Schema()
	if err != nil {
		t.Fatal(err)
	}
	fv, err := m.FileVersion()
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.CreateFile(s, FileOptions{Version: fv, MaxPageBytes: maxPage})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

func appendFiles(t testing.TB, d *Dataset, cfg map[string]string, files ...Descriptor) *CommitResult {
	t.Helper()
	v, err := d.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Commit(context.Background(), CommitRequest{ParentVersion: v, Kind: Append, Files: files, ConfigSet: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// normalize round-trips v through JSON so Go and oracle values compare.
func normalize(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameColumns compares every expected column with the oracle's dump.
// Each column is normalized through JSON once, not cell by cell: the
// official-encodings test compares millions of cells.
func sameColumns(t testing.TB, got *oracle.Dump, want map[string][]any) {
	t.Helper()
	for name, cells := range want {
		g, ok := got.Columns[name]
		if !ok {
			t.Errorf("oracle dump has no column %q", name)
			continue
		}
		if len(g) != len(cells) {
			t.Errorf("column %q: oracle has %d values, want %d", name, len(g), len(cells))
			continue
		}
		gv, _ := normalize(t, g).([]any)
		wv, _ := normalize(t, cells).([]any)
		for i := range wv {
			if !reflect.DeepEqual(gv[i], wv[i]) {
				t.Errorf("column %q row %d: oracle %v, want %v", name, i, gv[i], wv[i])
				break
			}
		}
	}
}

func mergeWant(dst, src map[string][]any) map[string][]any {
	if dst == nil {
		dst = map[string][]any{}
	}
	for k, v := range src {
		dst[k] = append(dst[k], v...)
	}
	return dst
}

func newDataset(t testing.TB, s *arrow.Schema, fv FileVersion) *Dataset {
	t.Helper()
	d, err := Create(filepath.Join(t.TempDir(), "t.lance"), s, CreateOptions{FileVersion: fv})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}
