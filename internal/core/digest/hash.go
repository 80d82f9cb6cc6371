// Package digest hashes records by their canonical bytes and keeps
// order-independent digests of record multisets: a count and the sum of the
// rows' 64-bit hashes. The hash is seedless (xxHash64 of every column's
// value, nulls included), so a digest written today can be compared with a
// table read next year, after the WAL that held the records is trimmed.
package digest

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"
)

// Digest is the order-independent digest of a multiset of rows: how many
// and the sum (mod 2^64) of their hashes. Two multisets of rows with equal
// content have equal digests; digests of disjoint parts add up.
type Digest struct {
	Rows int64  `json:"rows"`
	Sum  uint64 `json:"sum,string"`
}

// Add counts every row of rec into d.
func (d *Digest) Add(rec arrow.RecordBatch) {
	for _, h := range Rows(rec) {
		d.AddHash(h)
	}
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

// Rows returns the hash of each row of rec, in order: every column's value,
// nulls included, so two rows hash alike only when their content is equal
// (up to 64-bit collisions).
func Rows(rec arrow.RecordBatch) []uint64 {
	h := xxhash.New()
	out := make([]uint64, rec.NumRows())
	for i := range out {
		h.Reset()
		for _, col := range rec.Columns() {
			hashValue(h, col, i)
			_, _ = h.Write([]byte{0xfe}) // column separator
		}
		out[i] = h.Sum64()
	}
	return out
}

func hashValue(h *xxhash.Digest, arr arrow.Array, i int) {
	if arr.IsNull(i) {
		_, _ = h.Write([]byte{0})
		return
	}
	_, _ = h.Write([]byte{1})
	var b [8]byte
	u64 := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = h.Write(b[:])
	}
	switch a := arr.(type) {
	case *array.Int64:
		u64(uint64(a.Value(i)))
	case *array.Int32:
		u64(uint64(a.Value(i)))
	case *array.Int16:
		u64(uint64(a.Value(i)))
	case *array.Int8:
		u64(uint64(a.Value(i)))
	case *array.Uint64:
		u64(a.Value(i))
	case *array.Uint32:
		u64(uint64(a.Value(i)))
	case *array.Float64:
		u64(math.Float64bits(a.Value(i)))
	case *array.Float32:
		u64(uint64(math.Float32bits(a.Value(i))))
	case *array.Boolean:
		if a.Value(i) {
			_, _ = h.Write([]byte{1})
		} else {
			_, _ = h.Write([]byte{2})
		}
	case *array.Timestamp:
		u64(uint64(a.Value(i)))
	case *array.String:
		u64(uint64(a.ValueLen(i)))
		_, _ = h.WriteString(a.Value(i))
	case *array.LargeString:
		s := a.Value(i)
		u64(uint64(len(s)))
		_, _ = h.WriteString(s)
	case *array.Binary:
		v := a.Value(i)
		u64(uint64(len(v)))
		_, _ = h.Write(v)
	case *array.LargeBinary:
		v := a.Value(i)
		u64(uint64(len(v)))
		_, _ = h.Write(v)
	case *array.FixedSizeList:
		start, end := a.ValueOffsets(i)
		u64(uint64(end - start))
		for j := start; j < end; j++ {
			hashValue(h, a.ListValues(), int(j))
		}
	case *array.List:
		start, end := a.ValueOffsets(i)
		u64(uint64(end - start))
		for j := start; j < end; j++ {
			hashValue(h, a.ListValues(), int(j))
		}
	case *array.Struct:
		for f := 0; f < a.NumField(); f++ {
			hashValue(h, a.Field(f), i)
		}
	default:
		_, _ = h.WriteString(arr.ValueStr(i))
	}
}
