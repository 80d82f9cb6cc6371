package arrowchecktest

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// AllTypes returns a valid stream of one batch with a nullable column of
// every type walctl stores (time zones and list items in each variant),
// plus a non-nullable "id": nulls, empty and multibyte strings, NaN, -0 and
// infinities, and its schema.
func AllTypes() (*arrow.Schema, []byte) {
	types := []arrow.DataType{
		arrow.FixedWidthTypes.Boolean,
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
		&arrow.FixedSizeBinaryType{ByteWidth: 3}, arrow.FixedWidthTypes.Date32,
		&arrow.TimestampType{Unit: arrow.Second}, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"},
		&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "+0530"},
		arrow.FixedSizeListOf(2, arrow.FixedWidthTypes.Float16), arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32),
		arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int8), arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Uint8),
	}
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	for i, t := range types {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%02d", i), Type: t, Nullable: true})
	}
	s := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	const rows = 4
	for r := 0; r < rows; r++ {
		b.Field(0).(*array.Int64Builder).Append(int64(r))
		for i := 1; i < len(fields); i++ {
			if r == 2 {
				b.Field(i).AppendNull()
				continue
			}
			appendValue(b.Field(i), r)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return s, Encode(s, rec)
}

var (
	floats   = []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1)}
	strs     = []string{"", "é", "", "日本-🦀"}
	bytesVal = [][]byte{{}, {0, 0xff}, nil, []byte("\x00bin")}
)

func appendValue(b array.Builder, r int) {
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		bb.Append(r%2 == 0)
	case *array.Int8Builder:
		bb.Append(int8(-128 + r))
	case *array.Int16Builder:
		bb.Append(int16(-32768 + r))
	case *array.Int32Builder:
		bb.Append(int32(math.MinInt32 + r))
	case *array.Int64Builder:
		bb.Append(int64(math.MinInt64 + r))
	case *array.Uint8Builder:
		bb.Append(uint8(255 - r))
	case *array.Uint16Builder:
		bb.Append(uint16(65535 - r))
	case *array.Uint32Builder:
		bb.Append(uint32(math.MaxUint32 - r))
	case *array.Uint64Builder:
		bb.Append(uint64(math.MaxUint64 - uint64(r)))
	case *array.Float16Builder:
		bb.Append(float16.New(float32(floats[r])))
	case *array.Float32Builder:
		bb.Append(float32(floats[r]))
	case *array.Float64Builder:
		bb.Append(floats[r])
	case *array.StringBuilder:
		bb.Append(strs[r])
	case *array.LargeStringBuilder:
		bb.Append(strs[r])
	case *array.BinaryBuilder:
		bb.Append(bytesVal[r])
	case *array.FixedSizeBinaryBuilder:
		bb.Append([]byte{byte(r), 0xff, 0})
	case *array.Date32Builder:
		bb.Append(arrow.Date32(-719162 + r*1000000))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(int64(r) * 1_700_000_000_123))
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		n := int(bb.Type().(*arrow.FixedSizeListType).Len())
		for k := 0; k < n; k++ {
			appendValue(bb.ValueBuilder(), (r+k)%2*3) // rows 0 and 3 of the value tables
		}
	default:
		panic(fmt.Sprintf("arrowchecktest: no value for %T", b))
	}
}
