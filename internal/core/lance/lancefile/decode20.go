package lancefile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// decodePage20 turns one file-format-2.0 page into an Arrow array.
func decodePage20(body []byte, bufs [][]byte, n int, dt arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	enc, err := lancepb.DecodeArrayEncoding(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if what := enc.Unsupported(); what != "" {
		return nil, fmt.Errorf("%s: %w", what, ErrUnsupported)
	}
	buf := func(a *lancepb.ArrayEncoding) ([]byte, error) {
		if int(a.BufferIndex) >= len(bufs) {
			return nil, fmt.Errorf("buffer %d of %d: %w", a.BufferIndex, len(bufs), ErrCorrupt)
		}
		return bufs[a.BufferIndex], nil
	}
	if isBinary(dt) {
		if enc.Kind != lancepb.EncBinary || enc.Indices.Kind != lancepb.EncNullable || enc.Indices.Nullability != lancepb.NoNulls || enc.Indices.Values.Kind != lancepb.EncFlat || enc.Indices.Values.BitsPerValue != 64 {
			return nil, fmt.Errorf("binary column with a layout other than u64 indices: %w", ErrUnsupported)
		}
		idx, err := buf(enc.Indices.Values)
		if err != nil {
			return nil, err
		}
		data, err := buf(enc.Bytes)
		if err != nil {
			return nil, err
		}
		return binaryFromEnds(idx, data, enc.NullAdjustment, n, dt, mem)
	}
	if enc.Kind != lancepb.EncNullable {
		return nil, fmt.Errorf("fixed-width column not wrapped in nullable: %w", ErrUnsupported)
	}
	valueBits := uint64(bitsPerValue(dt))
	if enc.Nullability == lancepb.AllNulls {
		return array.MakeArrayOfNull(mem, dt, n), nil
	}
	var validity []byte
	nulls := 0
	if enc.Nullability == lancepb.SomeNulls {
		if validity, err = buf(enc.Validity); err != nil {
			return nil, err
		}
		if len(validity) < (n+7)/8 {
			return nil, fmt.Errorf("validity of %d bytes for %d rows: %w", len(validity), n, ErrCorrupt)
		}
		nulls = n - bitutil.CountSetBits(validity, 0, n)
	}
	v := enc.Values
	flat := v
	if v.Kind == lancepb.EncFixedSizeList {
		flat = v.Items
		if flat.Kind == lancepb.EncNullable && flat.Nullability == lancepb.NoNulls {
			flat = flat.Values // the official 2.0 writer wraps the items
		}
		if flat.Kind != lancepb.EncFlat || flat.BitsPerValue*uint64(v.Dimension) != valueBits {
			return nil, fmt.Errorf("fixed_size_list layout (dim %d, items kind %d of %d bits) does not match %s: %w", v.Dimension, flat.Kind, flat.BitsPerValue, dt, ErrUnsupported)
		}
	} else if v.Kind != lancepb.EncFlat || v.BitsPerValue != valueBits {
		return nil, fmt.Errorf("flat layout of %d bits does not match %s: %w", v.BitsPerValue, dt, ErrUnsupported)
	}
	values, err := buf(flat)
	if err != nil {
		return nil, err
	}
	if uint64(len(values))*8 < valueBits*uint64(n) {
		return nil, fmt.Errorf("values of %d bytes for %d rows of %s: %w", len(values), n, dt, ErrCorrupt)
	}
	return fixedArray(dt, n, validity, nulls, values), nil
}

// fixedArray builds a fixed-width Arrow array over the given buffers.
func fixedArray(dt arrow.DataType, n int, validity []byte, nulls int, values []byte) arrow.Array {
	var vb *memory.Buffer
	if nulls > 0 {
		vb = memory.NewBufferBytes(validity)
	}
	if fsl, ok := dt.(*arrow.FixedSizeListType); ok {
		dim := int(fsl.Len())
		child := array.NewData(fsl.Elem(), n*dim, []*memory.Buffer{nil, memory.NewBufferBytes(values)}, nil, 0, 0)
		defer child.Release()
		data := array.NewData(dt, n, []*memory.Buffer{vb}, []arrow.ArrayData{child}, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data)
	}
	data := array.NewData(dt, n, []*memory.Buffer{vb, memory.NewBufferBytes(values)}, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// binaryFromEnds rebuilds a binary-like array from Lance's end offsets
// (null rows carry +adj) and the value bytes.
func binaryFromEnds(idx, data []byte, adj uint64, n int, dt arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	if len(idx) < 8*n {
		return nil, fmt.Errorf("indices of %d bytes for %d rows: %w", len(idx), n, ErrCorrupt)
	}
	ends := arrow.Uint64Traits.CastFromBytes(idx[:8*n])
	validity := make([]byte, (n+7)/8)
	nulls := 0
	offs64 := make([]int64, n+1)
	var prev uint64
	for i, e := range ends {
		if adj > 0 && e >= adj {
			e -= adj
			nulls++
		} else {
			bitutil.SetBit(validity, i)
		}
		if e < prev || e > uint64(len(data)) {
			return nil, fmt.Errorf("offset %d out of order or beyond %d value bytes: %w", e, len(data), ErrCorrupt)
		}
		offs64[i+1] = int64(e)
		prev = e
	}
	return binaryArray(dt, offs64, data[:prev], validity, nulls)
}

// binaryArray builds a binary-like array of type dt from n+1 offsets into
// data and a validity bitmap (ignored when nulls is 0).
func binaryArray(dt arrow.DataType, offs64 []int64, data, validity []byte, nulls int) (arrow.Array, error) {
	n := len(offs64) - 1
	var ob *memory.Buffer
	switch dt.ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		ob = memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(offs64))
	default:
		if offs64[n] > 1<<31-1 {
			return nil, fmt.Errorf("%d value bytes overflow 32-bit offsets: %w", offs64[n], ErrCorrupt)
		}
		o32 := make([]int32, n+1)
		for i, o := range offs64 {
			o32[i] = int32(o)
		}
		ob = memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(o32))
	}
	var vb *memory.Buffer
	if nulls > 0 {
		vb = memory.NewBufferBytes(validity)
	}
	d := array.NewData(dt, n, []*memory.Buffer{vb, ob, memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d), nil
}
