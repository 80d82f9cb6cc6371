// Package digest hashes records by their content and keeps order-independent
// digests of record multisets: a count and the sum of the rows' 64-bit
// hashes. The row hashes are seedless, so a digest written today can be
// compared with a table read next year, after the WAL that held the records
// is trimmed. There are two row hashes (Hash); a table's digests are all made
// with the one recorded for it, and both are pinned by tests.
package digest

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"
)

// Hash names a row-hash function. A table's digests are made with one
// function for its whole life: recorded digests are compared with rows
// hashed when the table is audited, so the function is recorded with them
// and never changes for a table.
type Hash int

const (
	// Canonical (1) is xxHash64 of each row's canonical bytes
	// (CanonicalRows): the first row hash, kept for tables published with
	// it.
	Canonical Hash = 1
	// Columns (2) folds one 64-bit word per column and the row's null mask
	// (ColumnRows): about twice as fast as Canonical on rows with an
	// embedding, whose every float32 element Canonical lays out as 9 bytes.
	Columns Hash = 2
	// Latest is the row hash of tables that have no digest yet.
	Latest = Columns
)

// Check reports an error for a value that names no row hash (a record
// written by a newer walctl, or damaged).
func (h Hash) Check() error {
	if h != Canonical && h != Columns {
		return fmt.Errorf("row hash %d is not one this walctl knows (1 or 2)", int(h))
	}
	return nil
}

// Rows returns the hash of each row of rec, in order, by function h
// (Check must have passed).
func (h Hash) Rows(rec arrow.RecordBatch) []uint64 { return h.appendRows(nil, rec) }

func (h Hash) appendRows(out []uint64, rec arrow.RecordBatch) []uint64 {
	if h == Columns {
		return appendColumnRows(out, rec)
	}
	return appendCanonicalRows(out, rec)
}

// Digest is the order-independent digest of a multiset of rows: how many
// and the sum (mod 2^64) of their hashes. Two multisets of rows with equal
// content have equal digests; digests of disjoint parts add up.
type Digest struct {
	Rows int64  `json:"rows"`
	Sum  uint64 `json:"sum,string"`
}

// Add counts every row of rec, hashed by h, into d. The row hashes are
// taken into a pooled buffer: a publication digests every entry it writes.
func (d *Digest) Add(h Hash, rec arrow.RecordBatch) {
	p := getScratch(0)
	*p = h.appendRows(*p, rec)
	for _, v := range *p {
		d.AddHash(v)
	}
	scratch.Put(p)
}

// AddHash counts one row by its hash.
func (d *Digest) AddHash(h uint64) {
	d.Rows++
	d.Sum += h
}

// Plus returns the digest of both multisets.
func (d Digest) Plus(o Digest) Digest { return Digest{Rows: d.Rows + o.Rows, Sum: d.Sum + o.Sum} }

// Minus returns the digest of d without o's rows (o must be part of d for
// the result to describe a multiset).
func (d Digest) Minus(o Digest) Digest { return Digest{Rows: d.Rows - o.Rows, Sum: d.Sum - o.Sum} }

// CanonicalRows returns the Canonical hash of each row of rec, in order:
// every column's value, nulls included, so two rows hash alike only when
// their content is equal (up to 64-bit collisions). A row's canonical bytes
// are laid out in one reused buffer and hashed at once: streaming them
// value by value into the hash cost a call and a copy per value (most of a
// publication's CPU, with vector columns). Each column's appender is chosen
// once per batch, not per value.
func CanonicalRows(rec arrow.RecordBatch) []uint64 { return appendCanonicalRows(nil, rec) }

// appendCanonicalRows appends the Canonical hash of each of rec's rows to
// out.
func appendCanonicalRows(out []uint64, rec arrow.RecordBatch) []uint64 {
	apps := make([]func(b []byte, i int) []byte, rec.NumCols())
	for c, col := range rec.Columns() {
		apps[c] = appender(col)
	}
	out = slices.Grow(out, int(rec.NumRows()))
	var buf []byte
	for i := range int(rec.NumRows()) {
		buf = buf[:0]
		for _, app := range apps {
			buf = app(buf, i)
			buf = append(buf, 0xfe) // column separator
		}
		out = append(out, xxhash.Sum64(buf))
	}
	return out
}

// appender returns what appendValue does for arr's values, its type switch
// resolved once (the common types; others go through appendValue).
func appender(arr arrow.Array) func(b []byte, i int) []byte {
	u64 := binary.LittleEndian.AppendUint64
	var value func(b []byte, i int) []byte
	switch a := arr.(type) {
	case *array.Int64:
		value = func(b []byte, i int) []byte { return u64(b, uint64(a.Value(i))) }
	case *array.Float64:
		value = func(b []byte, i int) []byte { return u64(b, math.Float64bits(a.Value(i))) }
	case *array.Float32:
		value = func(b []byte, i int) []byte { return u64(b, uint64(math.Float32bits(a.Value(i)))) }
	case *array.Timestamp:
		value = func(b []byte, i int) []byte { return u64(b, uint64(a.Value(i))) }
	case *array.String:
		value = func(b []byte, i int) []byte { return append(u64(b, uint64(a.ValueLen(i))), a.Value(i)...) }
	case *array.Binary:
		value = func(b []byte, i int) []byte { v := a.Value(i); return append(u64(b, uint64(len(v))), v...) }
	case *array.FixedSizeList:
		value = func(b []byte, i int) []byte {
			start, end := a.ValueOffsets(i)
			return appendValues(u64(b, uint64(end-start)), a.ListValues(), int(start), int(end))
		}
	case *array.List:
		value = func(b []byte, i int) []byte {
			start, end := a.ValueOffsets(i)
			return appendValues(u64(b, uint64(end-start)), a.ListValues(), int(start), int(end))
		}
	default:
		return func(b []byte, i int) []byte { return appendValue(b, arr, i) }
	}
	if arr.NullN() == 0 {
		return func(b []byte, i int) []byte { return value(append(b, 1), i) }
	}
	return func(b []byte, i int) []byte {
		if arr.IsNull(i) {
			return append(b, 0)
		}
		return value(append(b, 1), i)
	}
}

// appendValue appends the canonical bytes of arr's value i: 0 for a null;
// else 1 and the value (fixed-width values as 8 little-endian bytes,
// variable-width ones and lists prefixed by their length as 8 bytes).
func appendValue(b []byte, arr arrow.Array, i int) []byte {
	if arr.IsNull(i) {
		return append(b, 0)
	}
	b = append(b, 1)
	u64 := binary.LittleEndian.AppendUint64
	switch a := arr.(type) {
	case *array.Int64:
		return u64(b, uint64(a.Value(i)))
	case *array.Int32:
		return u64(b, uint64(a.Value(i)))
	case *array.Int16:
		return u64(b, uint64(a.Value(i)))
	case *array.Int8:
		return u64(b, uint64(a.Value(i)))
	case *array.Uint64:
		return u64(b, a.Value(i))
	case *array.Uint32:
		return u64(b, uint64(a.Value(i)))
	case *array.Float64:
		return u64(b, math.Float64bits(a.Value(i)))
	case *array.Float32:
		return u64(b, uint64(math.Float32bits(a.Value(i))))
	case *array.Boolean:
		if a.Value(i) {
			return append(b, 1)
		}
		return append(b, 2)
	case *array.Timestamp:
		return u64(b, uint64(a.Value(i)))
	case *array.String:
		return append(u64(b, uint64(a.ValueLen(i))), a.Value(i)...)
	case *array.LargeString:
		s := a.Value(i)
		return append(u64(b, uint64(len(s))), s...)
	case *array.Binary:
		v := a.Value(i)
		return append(u64(b, uint64(len(v))), v...)
	case *array.LargeBinary:
		v := a.Value(i)
		return append(u64(b, uint64(len(v))), v...)
	case *array.FixedSizeList:
		start, end := a.ValueOffsets(i)
		return appendValues(u64(b, uint64(end-start)), a.ListValues(), int(start), int(end))
	case *array.List:
		start, end := a.ValueOffsets(i)
		return appendValues(u64(b, uint64(end-start)), a.ListValues(), int(start), int(end))
	case *array.Struct:
		for f := 0; f < a.NumField(); f++ {
			b = appendValue(b, a.Field(f), i)
		}
		return b
	}
	return append(b, arr.ValueStr(i)...)
}

// appendValues appends the values [start, end) of a list's child array:
// a float32 child (an embedding) without a type switch per element.
func appendValues(b []byte, child arrow.Array, start, end int) []byte {
	if f, ok := child.(*array.Float32); ok && f.NullN() == 0 {
		return appendFloat32s(b, f.Float32Values()[start:end])
	}
	if f, ok := child.(*array.Float32); ok {
		vals := f.Float32Values()
		for j := start; j < end; j++ {
			if f.IsNull(j) {
				b = append(b, 0)
				continue
			}
			b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(math.Float32bits(vals[j])))
		}
		return b
	}
	for j := start; j < end; j++ {
		b = appendValue(b, child, j)
	}
	return b
}

// appendFloat32s appends 1 and the value's 8 little-endian bytes for each
// of vals (the canonical bytes of float32 elements without nulls), laid out
// in place two elements (18 bytes) at a time: the four value bytes are
// followed by four zero bytes, so a pair is two 8-byte stores and two zero
// bytes, with one bounds check.
func appendFloat32s(b []byte, vals []float32) []byte {
	n := len(b)
	b = slices.Grow(b, 9*len(vals))[:n+9*len(vals)]
	dst := b[n:]
	k := 0
	for ; k+1 < len(vals); k += 2 {
		d := dst[9*k : 9*k+18 : 9*k+18]
		binary.LittleEndian.PutUint64(d[0:8], 1|uint64(math.Float32bits(vals[k]))<<8)
		binary.LittleEndian.PutUint64(d[8:16], 1<<8|uint64(math.Float32bits(vals[k+1]))<<16)
		d[16], d[17] = 0, 0
	}
	if k < len(vals) {
		d := dst[9*k : 9*k+9 : 9*k+9]
		d[0] = 1
		binary.LittleEndian.PutUint64(d[1:9], uint64(math.Float32bits(vals[k])))
	}
	return b
}
