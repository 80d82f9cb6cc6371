// Package synth generates Arrow record batches of any walctl-supported
// schema, for `walctl wal load`, the quick start and benchmarks. A field named
// "id" of type int64 gets a strictly increasing sequence, so that every
// produced record can be recognised again in a table (exactly-once checks).
package synth

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
)

// IDField is the name of the field that receives the unique sequence.
const IDField = "id"

// Generator makes batches. It is not safe for concurrent use; give each
// producer its own, with a distinct id range (NextID).
type Generator struct {
	schema *arrow.Schema
	rng    *rand.Rand
	mem    memory.Allocator
	// NextID is the id of the next record.
	NextID int64
	// StringBytes and BinaryBytes size variable-width values (defaults 16, 256).
	StringBytes, BinaryBytes int
	// Reuse, when > 0, generates the values of this many batches only:
	// later batches of the same size share one of them in turn, with a
	// fresh id column (zero copy), so that a benchmark's producers spend
	// their CPU on appending rather than on random values. Ids stay unique.
	Reuse int

	pool []arrow.RecordBatch // the batches whose values are reused
	turn int
}

// New returns a generator for schema, refusing types it cannot generate.
func New(schema *arrow.Schema, seed uint64) (*Generator, error) {
	for _, f := range schema.Fields() {
		if !supported(f.Type) {
			return nil, fmt.Errorf("synth: field %q: type %s not supported: %w", f.Name, f.Type, errs.ErrInvalid)
		}
	}
	return &Generator{schema: schema, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		mem: memory.DefaultAllocator, NextID: 1, StringBytes: 16, BinaryBytes: 256}, nil
}

func supported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.UINT64, arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.BINARY,
		arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY, arrow.DATE32, arrow.TIMESTAMP:
		return true
	case arrow.FIXED_SIZE_LIST:
		return supported(t.(*arrow.FixedSizeListType).Elem())
	}
	return false
}

// Batch returns a new batch of rows records; the caller releases it.
func (g *Generator) Batch(rows int) arrow.RecordBatch {
	if g.Reuse <= 0 {
		return g.generate(rows)
	}
	if len(g.pool) > 0 && g.pool[0].NumRows() != int64(rows) {
		g.Release()
	}
	if len(g.pool) < g.Reuse {
		b := g.generate(rows)
		b.Retain()
		g.pool = append(g.pool, b)
		return b
	}
	tmpl := g.pool[g.turn%len(g.pool)]
	g.turn++
	cols := slices.Clone(tmpl.Columns())
	for i, f := range g.schema.Fields() {
		if f.Name == IDField && f.Type.ID() == arrow.INT64 {
			ib := array.NewInt64Builder(g.mem)
			ib.Reserve(rows)
			for r := 0; r < rows; r++ {
				ib.UnsafeAppend(g.NextID + int64(r))
			}
			ids := ib.NewArray()
			ib.Release()
			defer ids.Release()
			cols[i] = ids
		}
	}
	g.NextID += int64(rows)
	return array.NewRecordBatch(g.schema, cols, int64(rows))
}

// Release drops the batches kept for Reuse.
func (g *Generator) Release() {
	for _, b := range g.pool {
		b.Release()
	}
	g.pool, g.turn = nil, 0
}

func (g *Generator) generate(rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(g.mem, g.schema)
	defer b.Release()
	for i, f := range g.schema.Fields() {
		fb := b.Field(i)
		for r := 0; r < rows; r++ {
			if f.Name == IDField && f.Type.ID() == arrow.INT64 {
				fb.(*array.Int64Builder).Append(g.NextID + int64(r))
				continue
			}
			if f.Nullable && g.rng.IntN(10) == 0 {
				fb.AppendNull()
				continue
			}
			g.value(fb, f.Type)
		}
	}
	g.NextID += int64(rows)
	return b.NewRecordBatch()
}

func (g *Generator) bytes(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = 'a' + byte(g.rng.IntN(26))
	}
	return out
}

func (g *Generator) value(b array.Builder, t arrow.DataType) {
	r := g.rng
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		bb.Append(r.IntN(2) == 1)
	case *array.Int8Builder:
		bb.Append(int8(r.Int32()))
	case *array.Int16Builder:
		bb.Append(int16(r.Int32()))
	case *array.Int32Builder:
		bb.Append(r.Int32())
	case *array.Int64Builder:
		bb.Append(r.Int64())
	case *array.Uint8Builder:
		bb.Append(uint8(r.Uint32()))
	case *array.Uint16Builder:
		bb.Append(uint16(r.Uint32()))
	case *array.Uint32Builder:
		bb.Append(r.Uint32())
	case *array.Uint64Builder:
		bb.Append(r.Uint64())
	case *array.Float16Builder:
		bb.Append(float16.New(r.Float32()))
	case *array.Float32Builder:
		bb.Append(r.Float32())
	case *array.Float64Builder:
		bb.Append(r.Float64())
	case *array.StringBuilder:
		bb.Append(string(g.bytes(g.StringBytes)))
	case *array.LargeStringBuilder:
		bb.Append(string(g.bytes(g.StringBytes)))
	case *array.BinaryBuilder: // binary and large_binary
		bb.Append(g.bytes(g.BinaryBytes))
	case *array.FixedSizeBinaryBuilder:
		bb.Append(g.bytes(t.(*arrow.FixedSizeBinaryType).ByteWidth))
	case *array.Date32Builder:
		bb.Append(arrow.Date32FromTime(time.Unix(r.Int64N(4e9), 0)))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(r.Int64N(4e9)))
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		lt := t.(*arrow.FixedSizeListType)
		for i := int32(0); i < lt.Len(); i++ {
			g.value(bb.ValueBuilder(), lt.Elem())
		}
	default:
		panic(fmt.Sprintf("synth: unhandled builder %T", b))
	}
}
