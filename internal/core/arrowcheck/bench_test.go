package arrowcheck_test

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// BenchmarkBatch measures validation of a typical entry: 1,024 rows of an
// int64 id, a timestamp, a 200-byte utf8 body (some multibyte), a nullable
// binary and a 768-dim float32 vector (about 3.4 MB).
func BenchmarkBatch(b *testing.B) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "body", Type: arrow.BinaryTypes.String},
		{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOf(768, arrow.PrimitiveTypes.Float32)},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer rb.Release()
	body := fmt.Sprintf("%-190s", "record body — é 日本")
	for r := 0; r < 1024; r++ {
		rb.Field(0).(*array.Int64Builder).Append(int64(r))
		rb.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r))
		rb.Field(2).(*array.StringBuilder).Append(body)
		if r%10 == 0 {
			rb.Field(3).AppendNull()
		} else {
			rb.Field(3).(*array.BinaryBuilder).Append([]byte(body[:64]))
		}
		l := rb.Field(4).(*array.FixedSizeListBuilder)
		l.Append(true)
		for k := 0; k < 768; k++ {
			l.ValueBuilder().(*array.Float32Builder).Append(float32(k))
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	size := int64(0)
	for _, c := range rec.Columns() {
		size += int64(c.Data().SizeInBytes())
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := arrowcheck.Batch(s, rec); err != nil {
			b.Fatal(err)
		}
	}
}
