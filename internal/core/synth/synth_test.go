package synth

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/schemaspec"
)

func TestEveryTypeAndUniqueIDs(t *testing.T) {
	var fields []arrow.Field
	fields = append(fields, arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64})
	for i, n := range []string{"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
		"float16", "float32", "float64", "utf8", "large_utf8", "binary", "large_binary", "date32",
		"timestamp[us, UTC]", "fixed_size_binary[4]", "fixed_size_list<float32>[3]", "fixed_size_list<uint8>[2]"} {
		ty, err := schemaspec.ParseType(n)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, arrow.Field{Name: "f" + string(rune('a'+i)), Type: ty, Nullable: true})
	}
	s := arrow.NewSchema(fields, nil)
	g, err := New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Batch(100), g.Batch(50)
	defer a.Release()
	defer b.Release()
	if a.NumRows() != 100 || b.NumRows() != 50 || !a.Schema().Equal(s) {
		t.Fatalf("rows %d %d", a.NumRows(), b.NumRows())
	}
	ids := a.Column(0).(*array.Int64)
	if ids.Value(0) != 1 || ids.Value(99) != 100 || b.Column(0).(*array.Int64).Value(0) != 101 {
		t.Fatalf("ids not sequential")
	}
	nulls := 0
	for _, c := range a.Columns()[1:] {
		nulls += c.NullN()
	}
	if nulls == 0 {
		t.Fatalf("nullable fields got no nulls")
	}
}

// With Reuse, batches after the first Reuse share their values in turn,
// with fresh, still sequential ids; a new size generates anew.
func TestReuseKeepsIDsUnique(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	g, err := New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	g.Reuse = 2
	defer g.Release()
	var bs []arrow.RecordBatch
	for i := 0; i < 5; i++ {
		bs = append(bs, g.Batch(10))
		defer bs[i].Release()
	}
	for i, b := range bs {
		if ids := b.Column(0).(*array.Int64); ids.Len() != 10 || ids.Value(0) != int64(10*i+1) || ids.Value(9) != int64(10*i+10) {
			t.Fatalf("batch %d ids %v", i, ids)
		}
	}
	body := func(b arrow.RecordBatch) string { return b.Column(1).(*array.String).Value(3) }
	if body(bs[2]) != body(bs[0]) || body(bs[3]) != body(bs[1]) || body(bs[4]) != body(bs[0]) || body(bs[0]) == body(bs[1]) {
		t.Fatalf("values not reused in turn: %q %q %q %q %q", body(bs[0]), body(bs[1]), body(bs[2]), body(bs[3]), body(bs[4]))
	}
	if c := g.Batch(7); c.NumRows() != 7 || c.Column(0).(*array.Int64).Value(0) != 51 {
		t.Fatalf("a new size: %d rows, first id %d", c.NumRows(), c.Column(0).(*array.Int64).Value(0))
	} else {
		c.Release()
	}
}
