package digest

import (
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"
)

// ColumnRows returns the Columns hash of each row of rec, in order.
//
// A row's hash folds one 64-bit word per column and then the row's null
// mask (bit c of word c/64 is set when column c is null, whose word is then
// 0) as xxHash64 folds an input of that many 8-byte little-endian words
// (seed 0; below four words that is xxHash64 of the row's words, which is
// how the tests check it). A column's word is:
//   - for integers, floats, timestamps and booleans, the value's bits:
//     integers sign- or zero-extended to 64 bits, floats' IEEE bits,
//     booleans 1 (true) or 2 (false);
//   - for strings and binaries, xxHash64 of the value's bytes;
//   - for a list or fixed-size list of numbers without a null element,
//     xxHash64 of the elements' little-endian bytes (an embedding is hashed
//     in place, not element by element);
//   - for any other value, xxHash64 of its canonical bytes (CanonicalRows).
//
// Like Canonical, it depends on values only, not on how arrays are laid
// out (an offset, a slice, a validity bitmap without nulls), and maps
// String and LargeString (Binary and LargeBinary) alike. Columns are taken
// one at a time, each with its type resolved once.
func ColumnRows(rec arrow.RecordBatch) []uint64 { return appendColumnRows(nil, rec) }

// appendColumnRows appends the Columns hash of each of rec's rows to out.
// Its working memory (a column's words, the null masks) is pooled: a
// publication digests every entry it writes.
func appendColumnRows(out []uint64, rec arrow.RecordBatch) []uint64 {
	n, cols := int(rec.NumRows()), int(rec.NumCols())
	maskWords := (cols + 63) / 64
	base := len(out)
	out = slices.Grow(out, n)[:base+n]
	hs := out[base:]
	for i := range hs {
		hs[i] = prime5 + uint64(8*(cols+maskWords))
	}
	wp := getScratch(n)
	defer scratch.Put(wp)
	w := words(*wp)
	var masks []uint64 // row i's mask words at masks[i*maskWords:], once a column has a null
	for c, col := range rec.Columns() {
		w.fill(col)
		if col.NullN() > 0 {
			if masks == nil {
				mp := getScratch(n * maskWords)
				defer scratch.Put(mp)
				masks = *mp
				clear(masks)
			}
			for i := range n {
				if col.IsNull(i) {
					w[i] = 0
					masks[i*maskWords+c/64] |= 1 << (c % 64)
				}
			}
		}
		for i, v := range w {
			hs[i] = fold(hs[i], v)
		}
	}
	for m := range maskWords {
		for i := range hs {
			var v uint64
			if masks != nil {
				v = masks[i*maskWords+m]
			}
			hs[i] = fold(hs[i], v)
		}
	}
	for i, h := range hs {
		hs[i] = avalanche(h)
	}
	return out
}

// scratch pools the word buffers of ColumnRows and Digest.Add.
var scratch sync.Pool

// getScratch returns a pooled buffer of n words (contents undefined); the
// caller puts it back.
func getScratch(n int) *[]uint64 {
	p, _ := scratch.Get().(*[]uint64)
	if p == nil {
		p = new([]uint64)
	}
	if cap(*p) < n {
		*p = make([]uint64, n)
	}
	*p = (*p)[:n]
	return p
}

// xxHash64's primes.
const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
	prime5 uint64 = 2870177450012600261
)

// fold takes one 8-byte word into h as xxHash64 does past its 32-byte
// stripes.
func fold(h, v uint64) uint64 {
	k := bits.RotateLeft64(v*prime2, 31) * prime1
	return bits.RotateLeft64(h^k, 27)*prime1 + prime4
}

// avalanche is xxHash64's final mix.
func avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	return h ^ h>>32
}

// words holds one column's word per row.
type words []uint64

// fill sets the word of each of arr's values (nulls included: the caller
// clears those).
func (w words) fill(arr arrow.Array) {
	switch a := arr.(type) {
	case *array.Int64:
		fillInts(w, a.Int64Values())
	case *array.Int32:
		fillInts(w, a.Int32Values())
	case *array.Int16:
		fillInts(w, a.Int16Values())
	case *array.Int8:
		fillInts(w, a.Int8Values())
	case *array.Uint64:
		fillUints(w, a.Uint64Values())
	case *array.Uint32:
		fillUints(w, a.Uint32Values())
	case *array.Uint16:
		fillUints(w, a.Uint16Values())
	case *array.Uint8:
		fillUints(w, a.Uint8Values())
	case *array.Timestamp:
		fillInts(w, a.TimestampValues())
	case *array.Float64:
		for i, v := range a.Float64Values() {
			w[i] = math.Float64bits(v)
		}
	case *array.Float32:
		for i, v := range a.Float32Values() {
			w[i] = uint64(math.Float32bits(v))
		}
	case *array.Boolean:
		for i := range w {
			w[i] = 2
			if a.Value(i) {
				w[i] = 1
			}
		}
	case *array.String:
		fillStrings(w, a)
	case *array.LargeString:
		fillStrings(w, a)
	case *array.Binary:
		fillBinaries(w, a)
	case *array.LargeBinary:
		fillBinaries(w, a)
	case array.ListLike:
		w.fillLists(a)
	default:
		w.fillCanonical(arr)
	}
}

type signed interface {
	~int8 | ~int16 | ~int32 | ~int64
}

type unsigned interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

func fillInts[T signed](w words, vals []T) {
	for i, v := range vals {
		w[i] = uint64(int64(v))
	}
}

func fillUints[T unsigned](w words, vals []T) {
	for i, v := range vals {
		w[i] = uint64(v)
	}
}

func fillStrings[A interface{ Value(int) string }](w words, a A) {
	for i := range w {
		w[i] = xxhash.Sum64String(a.Value(i))
	}
}

func fillBinaries[A interface{ Value(int) []byte }](w words, a A) {
	for i := range w {
		w[i] = xxhash.Sum64(a.Value(i))
	}
}

// fillLists hashes each list of numbers without a null element as its
// elements' bytes, in place; other lists by their canonical bytes.
func (w words) fillLists(a array.ListLike) {
	child := a.ListValues()
	width := numberWidth(child.DataType())
	if width == 0 || len(child.Data().Buffers()) < 2 || child.Data().Buffers()[1] == nil {
		w.fillCanonical(a)
		return
	}
	// The child's value buffer, from its first element: arrow's buffers
	// are little-endian (walctl is built for amd64 and arm64 only).
	raw := child.Data().Buffers()[1].Bytes()[child.Data().Offset()*width:]
	nulls := child.NullN() > 0
	var buf []byte
	for i := range w {
		start, end := a.ValueOffsets(i)
		if nulls && hasNull(child, int(start), int(end)) {
			buf = appendValue(buf[:0], a, i)
			w[i] = xxhash.Sum64(buf)
			continue
		}
		w[i] = xxhash.Sum64(raw[int(start)*width : int(end)*width])
	}
}

// fillCanonical hashes each value's canonical bytes.
func (w words) fillCanonical(arr arrow.Array) {
	var buf []byte
	for i := range w {
		buf = appendValue(buf[:0], arr, i)
		w[i] = xxhash.Sum64(buf)
	}
}

// numberWidth is the byte width of a fixed-width number type, 0 for other
// types.
func numberWidth(t arrow.DataType) int {
	switch t.ID() {
	case arrow.INT8, arrow.UINT8:
		return 1
	case arrow.INT16, arrow.UINT16:
		return 2
	case arrow.INT32, arrow.UINT32, arrow.FLOAT32:
		return 4
	case arrow.INT64, arrow.UINT64, arrow.FLOAT64:
		return 8
	}
	return 0
}

// hasNull reports whether any of arr's values [start, end) is null.
func hasNull(arr arrow.Array, start, end int) bool {
	for j := start; j < end; j++ {
		if arr.IsNull(j) {
			return true
		}
	}
	return false
}
