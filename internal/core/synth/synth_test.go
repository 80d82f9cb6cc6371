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
