package lancefile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/walctl/walctl/internal/core/errs"
)

// Helpers that view a row range of an Arrow array as the raw buffers Lance
// stores, without copying where the layout allows.

// nullCount returns the nulls among rows [start, start+n) of arr.
func nullCount(arr arrow.Array, start, n int) int {
	if arr.NullN() == 0 {
		return 0
	}
	bm := arr.NullBitmapBytes()
	if len(bm) == 0 {
		return 0
	}
	return n - bitutil.CountSetBits(bm, arr.Data().Offset()+start, n)
}

// bitsAt returns n bits of bm starting at bit off, realigned to bit 0 when
// needed (into dst, which must hold (n+7)/8 bytes).
func bitsAt(bm []byte, off, n int, dst []byte) []byte {
	nb := (n + 7) / 8
	if off%8 == 0 {
		return bm[off/8 : off/8+nb]
	}
	dst = dst[:nb]
	clear(dst)
	bitutil.CopyBitmap(bm, off, n, dst, 0)
	return dst
}

// fixedValues returns the value bytes of rows [start, start+n) of a
// fixed-width array of a byte-aligned type (fixed-size lists included).
// Booleans are handled by the caller.
func fixedValues(arr arrow.Array, start, n int) ([]byte, error) {
	if fsl, ok := arr.(*array.FixedSizeList); ok {
		dim := int(fsl.DataType().(*arrow.FixedSizeListType).Len())
		child := fsl.ListValues()
		first := (fsl.Data().Offset() + start) * dim
		if nullCount(child, first-child.Data().Offset(), n*dim) > 0 && itemNullsInValidRows(fsl, start, n, dim) {
			return nil, fmt.Errorf("null items inside a non-null fixed_size_list are not supported: %w", errs.ErrInvalid)
		}
		return fixedValues(child, first-child.Data().Offset(), n*dim)
	}
	width := bitsPerValue(arr.DataType()) / 8
	bufs := arr.Data().Buffers()
	if len(bufs) < 2 || bufs[1] == nil {
		return nil, fmt.Errorf("array of %s has no value buffer: %w", arr.DataType(), errs.ErrInvalid)
	}
	off := arr.Data().Offset() + start
	return bufs[1].Bytes()[off*width : (off+n)*width], nil
}

// itemNullsInValidRows reports whether some non-null list of rows
// [start,start+n) holds a null item (null items under a null list are fine).
func itemNullsInValidRows(fsl *array.FixedSizeList, start, n, dim int) bool {
	child := fsl.ListValues()
	for r := start; r < start+n; r++ {
		if fsl.IsNull(r) {
			continue
		}
		base := (fsl.Data().Offset()+r)*dim - child.Data().Offset()
		for k := 0; k < dim; k++ {
			if child.IsNull(base + k) {
				return true
			}
		}
	}
	return false
}

// binaryRange returns the byte range [first, last) that rows
// [start, start+n) of a binary-like array cover in its data buffer.
func binaryRange(arr arrow.Array, start, n int) (int64, int64) {
	off := arr.Data().Offset() + start
	bufs := arr.Data().Buffers()
	if bufs[1] == nil {
		return 0, 0
	}
	switch arr.DataType().ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		o := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())
		return o[off], o[off+n]
	default:
		o := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
		return int64(o[off]), int64(o[off+n])
	}
}

// binaryData returns the value bytes of rows [start, start+n).
func binaryData(arr arrow.Array, start, n int) []byte {
	first, last := binaryRange(arr, start, n)
	bufs := arr.Data().Buffers()
	if first == last || bufs[2] == nil {
		return nil
	}
	return bufs[2].Bytes()[first:last]
}

// binaryEnds fills ends with, for each row, the end offset of its value
// relative to the first row's start (Lance's "indices" without a leading 0).
func binaryEnds(arr arrow.Array, start, n int, ends []uint64) {
	off := arr.Data().Offset() + start
	bufs := arr.Data().Buffers()
	if bufs[1] == nil {
		clear(ends)
		return
	}
	switch arr.DataType().ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		o := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())[off : off+n+1]
		for i := range n {
			ends[i] = uint64(o[i+1] - o[0])
		}
	default:
		o := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[off : off+n+1]
		for i := range n {
			ends[i] = uint64(o[i+1] - o[0])
		}
	}
}

func isBinary(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}
