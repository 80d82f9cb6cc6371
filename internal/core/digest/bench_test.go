package digest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkRows hashes rows shaped like the publication benchmark's (an
// id, a short text and a 32-float embedding) with each row hash.
func BenchmarkRows(b *testing.B) {
	for _, h := range []Hash{Canonical, Columns} {
		b.Run(fmt.Sprintf("hash=%d", h), func(b *testing.B) { benchRows(b, h) })
	}
}

func benchRows(b *testing.B, h Hash) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOf(32, arrow.PrimitiveTypes.Float32)},
	}, nil)
	vec := "[" + strings.TrimSuffix(strings.Repeat("0.25,", 32), ",") + "]"
	var rows []string
	for i := 0; i < 4096; i++ {
		rows = append(rows, fmt.Sprintf(`{"id": %d, "body": "row %d of the benchmark batch", "vec": %s}`, i, i, vec))
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader("["+strings.Join(rows, ",")+"]"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.Rows(rec)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rec.NumRows()), "ns/row")
}
