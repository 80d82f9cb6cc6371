package arrowcheck_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
	"github.com/walctl/walctl/internal/core/schemaspec"
)

// FuzzBatch feeds arbitrary Arrow IPC bytes and a table schema (JSON; when
// it does not parse, the stream's own schema) to the validator. Properties:
// Batch never panics (not even into its own recover), and every batch it
// accepts is stored the way walctl stores it — the WAL's IPC encoding and
// both Lance file formats written by walctl's writer — and read back by
// walctl's readers equal to what was accepted.
//
// The seed corpus (testdata/fuzz/FuzzBatch, see TestFuzzCorpusUpToDate)
// holds a valid batch of every supported type and every bad stream of
// arrowchecktest; `go test` runs it.
func FuzzBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream, schemaJSON []byte) {
		r, err := arrowcheck.NewStreamReader(stream)
		if err != nil {
			return
		}
		defer r.Release()
		table := r.Schema()
		if s, err := schemaspec.Parse(schemaJSON); err == nil && len(schemaJSON) > 0 && schemaJSON[0] == '[' {
			table = s
		}
		for r.Next() {
			rec := r.RecordBatch()
			err := arrowcheck.Batch(table, rec)
			if err != nil {
				if strings.Contains(err.Error(), "validator panic") {
					t.Fatalf("validator panicked: %v", err)
				}
				if !errors.Is(err, arrowcheck.ErrMalformed) && !errors.Is(err, arrowcheck.ErrSchema) {
					t.Fatalf("refusal without a sentinel: %v", err)
				}
				continue
			}
			if arrowcheck.Schema(table) != nil {
				continue // no table can have this schema: nothing is stored
			}
			storeAndReadBack(t, table, rec)
		}
	})
}

// storeAndReadBack writes rec as the WAL does (IPC) and as a publication
// does (a Lance file of each format), and checks each reads back equal.
func storeAndReadBack(t *testing.T, schema *arrow.Schema, rec arrow.RecordBatch) {
	t.Helper()
	r := array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
	defer r.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(r); err != nil {
		t.Fatalf("IPC encoding of an accepted batch: %v", err)
	}
	w.Close()
	back, err := ipc.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil || !back.Next() {
		t.Fatalf("IPC decoding of an accepted batch: %v %v", err, back.Err())
	}
	sameColumns(t, "IPC", r, back.RecordBatch())
	back.Release()

	ls, err := lancefile.FromArrow(schema)
	if err != nil {
		t.Fatalf("Lance schema of an accepted table schema: %v", err)
	}
	for _, v := range []lancefile.Version{lancefile.V2_0, lancefile.V2_1} {
		path := filepath.Join(t.TempDir(), "f.lance")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		lw, err := lancefile.NewWriter(out, ls, lancefile.Options{Version: v})
		if err == nil {
			err = lw.Write(r)
		}
		if err == nil {
			_, err = lw.Finish()
		}
		out.Close()
		if err != nil {
			t.Fatalf("Lance %s writer refused an accepted batch: %v", v, err)
		}
		lf, err := lancefile.OpenFile(path)
		if err != nil {
			t.Fatalf("Lance %s reader: %v", v, err)
		}
		for i, f := range schema.Fields() {
			col, err := lf.ReadColumn(i, f.Name, f.Type, memory.DefaultAllocator)
			if err != nil {
				lf.Close()
				t.Fatalf("Lance %s reader, column %q: %v", v, f.Name, err)
			}
			if !equalRows(r.Column(i), col) {
				t.Errorf("Lance %s column %q reads back as\n%v\nwrote\n%v", v, f.Name, col, r.Column(i))
			}
			col.Release()
		}
		lf.Close()
	}
}

func sameColumns(t *testing.T, what string, want, got arrow.RecordBatch) {
	t.Helper()
	for i := range want.Columns() {
		if !equalRows(want.Column(i), got.Column(i)) {
			t.Errorf("%s: column %d reads back as %v, wrote %v", what, i, got.Column(i), want.Column(i))
		}
	}
}

// FuzzSchema feeds arbitrary bytes to the schema parser (JSON field lists
// and Arrow IPC schemas). Properties: no panic; an accepted schema passes
// arrowcheck.Schema, converts to a Lance schema, survives the WAL's schema
// encoding, and its JSON description parses back to the same schema. Seeds:
// testdata/fuzz/FuzzSchema.
func FuzzSchema(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := schemaspec.Parse(data)
		if err != nil {
			return
		}
		if err := arrowcheck.Schema(s); err != nil {
			t.Fatalf("Parse accepted a schema arrowcheck refuses: %v", err)
		}
		if _, err := lancefile.FromArrow(s); err != nil {
			t.Fatalf("Parse accepted a schema Lance cannot store: %v", err)
		}
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(s))
		if err := w.Close(); err != nil {
			t.Fatalf("IPC encoding of an accepted schema: %v", err)
		}
		again, err := schemaspec.Parse(buf.Bytes())
		if err != nil || !again.Equal(s) {
			t.Fatalf("IPC round trip: %v, %v", again, err)
		}
		js, err := jsonOf(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := schemaspec.Parse(js)
		if err != nil || !sameFields(back, s) {
			t.Fatalf("JSON round trip of %s: %v, %v", js, back, err)
		}
	})
}

func jsonOf(s *arrow.Schema) ([]byte, error) { return json.Marshal(schemaspec.Fields(s)) }

// sameFields compares what a JSON field list can say: names, types as
// schemaspec writes them, nullability.
func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.Fields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || schemaspec.FormatType(fa.Type) != schemaspec.FormatType(fb.Type) {
			return false
		}
	}
	return true
}

// equalRows compares two arrays row by row: the same nulls, and valid values
// equal, floats bit for bit (NaN, -0 and infinities included).
func equalRows(a, b arrow.Array) bool {
	if a.Len() != b.Len() || !arrow.TypeEqual(a.DataType(), b.DataType()) {
		return false
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) != b.IsNull(i) {
			return false
		}
		if !a.IsNull(i) && !valueEqual(a, b, i) {
			return false
		}
	}
	return true
}

func valueEqual(a, b arrow.Array, i int) bool {
	switch x := a.(type) {
	case *array.Float16:
		return x.Value(i).Uint16() == b.(*array.Float16).Value(i).Uint16()
	case *array.Float32:
		return math.Float32bits(x.Value(i)) == math.Float32bits(b.(*array.Float32).Value(i))
	case *array.Float64:
		return math.Float64bits(x.Value(i)) == math.Float64bits(b.(*array.Float64).Value(i))
	case *array.FixedSizeList:
		y := b.(*array.FixedSizeList)
		s1, e1 := x.ValueOffsets(i)
		s2, e2 := y.ValueOffsets(i)
		ca := array.NewSlice(x.ListValues(), s1, e1)
		defer ca.Release()
		cb := array.NewSlice(y.ListValues(), s2, e2)
		defer cb.Release()
		return equalRows(ca, cb)
	}
	return array.SliceEqual(a, int64(i), int64(i+1), b, int64(i), int64(i+1))
}
