// Package arrowchecktest builds Arrow IPC streams for tests of batch
// validation: one valid stream of the fixture table schema, and one bad
// stream per validation rule, each made by building a valid batch and then
// breaking exactly one rule in its raw buffers or metadata.
package arrowchecktest

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// SchemaJSON is Schema as `walctl table create --schema` reads it.
const SchemaJSON = `[{"name": "id", "type": "int64"},
 {"name": "s", "type": "utf8", "nullable": true},
 {"name": "b", "type": "binary", "nullable": true},
 {"name": "ls", "type": "large_utf8", "nullable": true},
 {"name": "flag", "type": "bool", "nullable": true},
 {"name": "vec", "type": "fixed_size_list<float32>[2]", "nullable": true},
 {"name": "lb", "type": "large_binary", "nullable": true},
 {"name": "h", "type": "fixed_size_binary[4]", "nullable": true}]
`

// Schema is the fixture table schema: one column of each layout walctl
// stores.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "h", Type: &arrow.FixedSizeBinaryType{ByteWidth: 4}, Nullable: true},
	}, nil)
}

// Rows is the number of rows of every fixture batch.
const Rows = 5

// Values of the valid batch; the bad streams change one thing.
type values struct {
	ids      []int64
	idNull   int // row of a null id (-1: none)
	s        []string
	b        []string // "" at row 2 is null
	ls       []string
	flags    []bool
	vec      [][2]float32
	vecNullT int // row whose item 0 is null in a valid list (-1: none)
	lb       []string
	h        []string
}

func validValues() values {
	return values{
		ids: []int64{101, 102, 103, 104, 105}, idNull: -1,
		s:     []string{"s0__", "s1__", "s2__", "s3__", "s4__"},
		b:     []string{"b0_", "b1_", "", "b3_", "b4_"},
		ls:    []string{"ls0__", "ls1__", "ls2__", "ls3__", "ls4__"},
		flags: []bool{true, false, true, false, true},
		vec:   [][2]float32{{0.5, 1.5}, {2.5, 3.5}, {4.5, 5.5}, {6.5, 7.5}, {8.5, 9.5}}, vecNullT: -1,
		lb: []string{"L0_", "L1_", "L2_", "L3_", "L4_"},
		h:  []string{"h000", "h001", "h002", "h003", "h004"},
	}
}

// record builds a batch of v with the fixture schema.
func (v values) record() arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema())
	defer b.Release()
	for r := 0; r < Rows; r++ {
		if r == v.idNull {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(v.ids[r])
		}
		b.Field(1).(*array.StringBuilder).Append(v.s[r])
		if r == 2 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.BinaryBuilder).Append([]byte(v.b[r]))
		}
		b.Field(3).(*array.LargeStringBuilder).Append(v.ls[r])
		b.Field(4).(*array.BooleanBuilder).Append(v.flags[r])
		lb := b.Field(5).(*array.FixedSizeListBuilder)
		lb.Append(true)
		items := lb.ValueBuilder().(*array.Float32Builder)
		if r == v.vecNullT {
			items.AppendNull()
		} else {
			items.Append(v.vec[r][0])
		}
		items.Append(v.vec[r][1])
		b.Field(6).(*array.BinaryBuilder).Append([]byte(v.lb[r]))
		b.Field(7).(*array.FixedSizeBinaryBuilder).Append([]byte(v.h[r]))
	}
	return b.NewRecordBatch()
}

// Encode writes rec as an Arrow IPC stream with schema (one batch, then the
// end-of-stream marker).
func Encode(schema *arrow.Schema, rec arrow.RecordBatch) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		panic(fmt.Sprintf("arrowchecktest: encode: %v", err))
	}
	if err := w.Close(); err != nil {
		panic(fmt.Sprintf("arrowchecktest: encode: %v", err))
	}
	return buf.Bytes()
}

// Valid returns a well-formed stream of the fixture schema: nulls, empty
// and multibyte values, every layout.
func Valid() []byte {
	rec := validValues().record()
	defer rec.Release()
	return Encode(Schema(), rec)
}

// Case is one bad stream.
type Case struct {
	// Rule names the rule the stream breaks.
	Rule   string
	Stream []byte
	// Decoder is true when arrow-go's IPC reader itself refuses the stream
	// (its array constructors check that rule); the WAL never sees a batch.
	Decoder bool
	// Column and Row are what the refusal must name (Row -1: no row).
	Column string
	Row    int
	// Want is the arrowcheck sentinel Batch returns (nil when Decoder).
	Want error
}

// Cases returns one bad stream per validation rule.
func Cases() []Case {
	return []Case{
		{Rule: "utf8 offset beyond the data buffer", Column: "s", Row: 2, Want: arrowcheck.ErrMalformed,
			Stream: patchOffset32(3, 0x7fffff00)},
		{Rule: "utf8 offsets not monotonic", Column: "s", Row: 1, Want: arrowcheck.ErrMalformed,
			Stream: patchOffset32(2, 2)},
		{Rule: "utf8 negative first offset", Column: "s", Row: 0, Want: arrowcheck.ErrMalformed,
			Stream: patchOffset32(0, -4)},
		{Rule: "utf8 last offset beyond the data buffer", Decoder: true, Row: -1,
			Stream: patchOffset32(5, 0x7fffff00)},
		{Rule: "binary offset beyond the data buffer", Column: "b", Row: 3, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.putInt32(bufB+1, 4, 1<<30) })},
		{Rule: "large_utf8 offset beyond the data buffer", Column: "ls", Row: 1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.putInt64(bufLS+1, 2, 0x7fffffff00) })},
		{Rule: "large_binary offsets not monotonic", Column: "lb", Row: 2, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.putInt64(bufLB+1, 3, 1) })},
		{Rule: "offsets buffer shorter than length+1", Decoder: true, Row: -1,
			Stream: patch(func(l *layout) { l.setBufLen(bufS+1, 8) })},
		{Rule: "invalid UTF-8 in utf8", Column: "s", Row: 3, Want: arrowcheck.ErrMalformed,
			Stream: withValues(func(v *values) { v.s[3] = "s\xff__" })},
		{Rule: "invalid UTF-8 in large_utf8", Column: "ls", Row: 4, Want: arrowcheck.ErrMalformed,
			Stream: withValues(func(v *values) { v.ls[4] = "ls4\xc3(" })},
		{Rule: "utf8 value split inside a character", Column: "s", Row: 2, Want: arrowcheck.ErrMalformed,
			Stream: withValues(func(v *values) { v.s[1], v.s[2] = "s1_\xc3", "\xa9s2_" })},
		{Rule: "null count disagrees with the validity bitmap", Column: "b", Row: -1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.setNullCount(nodeB, 2) })},
		{Rule: "validity bitmap too short", Column: "b", Row: -1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.setBufLen(bufB, 0) })},
		{Rule: "bool value bitmap too short", Column: "flag", Row: -1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.setBufLen(bufFlag+1, 0) })},
		{Rule: "fixed_size_binary buffer too short", Column: "h", Row: -1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.setBufLen(bufH+1, 12) })},
		{Rule: "int64 buffer too short", Column: "id", Row: -1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.setBufLen(bufID+1, 16) })},
		{Rule: "fixed_size_list child too short", Column: "vec", Row: -1, Want: arrowcheck.ErrMalformed,
			Stream: patch(func(l *layout) { l.setNodeLen(nodeVecItem, 8) })},
		{Rule: "null item in a valid fixed_size_list", Column: "vec.item", Row: 3, Want: arrowcheck.ErrSchema,
			Stream: withValues(func(v *values) { v.vecNullT = 3 })},
		{Rule: "null in a non-nullable column", Column: "id", Row: 4, Want: arrowcheck.ErrSchema,
			Stream: withValues(func(v *values) { v.idNull = 4 })},
		{Rule: "column type differs from the table", Column: "id", Row: -1, Want: arrowcheck.ErrSchema,
			Stream: otherSchema()},
	}
}

func withValues(change func(*values)) []byte {
	v := validValues()
	change(&v)
	rec := v.record()
	defer rec.Release()
	return Encode(Schema(), rec)
}

func patchOffset32(i int, val int32) []byte {
	return patch(func(l *layout) { l.putInt32(bufS+1, i, val) })
}

// otherSchema is a valid batch whose "id" column is int32.
func otherSchema() []byte {
	fields := Schema().Fields()
	fields[0].Type = arrow.PrimitiveTypes.Int32
	s := arrow.NewSchema(fields, nil)
	v := validValues()
	full := v.record()
	defer full.Release()
	ib := array.NewInt32Builder(memory.DefaultAllocator)
	defer ib.Release()
	for _, id := range v.ids {
		ib.Append(int32(id))
	}
	ids := ib.NewArray()
	defer ids.Release()
	cols := append([]arrow.Array{ids}, full.Columns()[1:]...)
	rec := array.NewRecordBatch(s, cols, Rows)
	defer rec.Release()
	return Encode(s, rec)
}

// Buffer and field-node indexes of the fixture schema in IPC order.
const (
	bufID   = 0  // validity, values
	bufS    = 2  // validity, offsets, data
	bufB    = 5  // validity, offsets, data
	bufLS   = 8  // validity, offsets, data
	bufFlag = 11 // validity, values
	// vec: validity 13, item validity 14, item values 15
	bufLB       = 16 // validity, offsets, data
	bufH        = 19 // validity, values
	numBufs     = 21
	nodeB       = 2
	nodeVecItem = 6
	numNodes    = 9
)
