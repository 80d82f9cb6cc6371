package verify

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// multiset counts rows by their content hash.
type multiset map[uint64]int64

// hasher hashes whole rows: every column's value, nulls included, so two
// rows hash alike only when their content is equal (up to 64-bit
// collisions, which a verification run of a few billion rows can afford).
type hasher struct {
	seed maphash.Seed
}

func newHasher() hasher { return hasher{seed: maphash.MakeSeed()} }

// add counts each row of rec into m, adding delta.
func (h hasher) add(m multiset, rec arrow.RecordBatch, delta int64) {
	var mh maphash.Hash
	mh.SetSeed(h.seed)
	for i := 0; i < int(rec.NumRows()); i++ {
		mh.Reset()
		for _, col := range rec.Columns() {
			hashValue(&mh, col, i)
			mh.WriteByte(0xfe) // column separator
		}
		m[mh.Sum64()] += delta
	}
}

// rows returns the hash of each row of rec, in order.
func (h hasher) rows(rec arrow.RecordBatch) []uint64 {
	var mh maphash.Hash
	mh.SetSeed(h.seed)
	out := make([]uint64, rec.NumRows())
	for i := range out {
		mh.Reset()
		for _, col := range rec.Columns() {
			hashValue(&mh, col, i)
			mh.WriteByte(0xfe)
		}
		out[i] = mh.Sum64()
	}
	return out
}

func hashValue(mh *maphash.Hash, arr arrow.Array, i int) {
	if arr.IsNull(i) {
		mh.WriteByte(0)
		return
	}
	mh.WriteByte(1)
	var b [8]byte
	u64 := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		mh.Write(b[:])
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
			mh.WriteByte(1)
		} else {
			mh.WriteByte(2)
		}
	case *array.Timestamp:
		u64(uint64(a.Value(i)))
	case *array.String:
		u64(uint64(a.ValueLen(i)))
		mh.WriteString(a.Value(i))
	case *array.LargeString:
		s := a.Value(i)
		u64(uint64(len(s)))
		mh.WriteString(s)
	case *array.Binary:
		v := a.Value(i)
		u64(uint64(len(v)))
		mh.Write(v)
	case *array.LargeBinary:
		v := a.Value(i)
		u64(uint64(len(v)))
		mh.Write(v)
	case *array.FixedSizeList:
		start, end := a.ValueOffsets(i)
		u64(uint64(end - start))
		for j := start; j < end; j++ {
			hashValue(mh, a.ListValues(), int(j))
		}
	case *array.List:
		start, end := a.ValueOffsets(i)
		u64(uint64(end - start))
		for j := start; j < end; j++ {
			hashValue(mh, a.ListValues(), int(j))
		}
	case *array.Struct:
		for f := 0; f < a.NumField(); f++ {
			hashValue(mh, a.Field(f), i)
		}
	default:
		mh.WriteString(arr.ValueStr(i))
	}
}
