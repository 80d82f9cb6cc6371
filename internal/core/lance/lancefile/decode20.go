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
	p := page20{bufs: bufs, n: n, dt: dt, mem: mem}
	if isBinary(dt) {
		if enc.Kind == lancepb.EncDictionary {
			return p.dictionary(enc)
		}
		return p.binary(enc, n)
	}
	if enc.Kind != lancepb.EncNullable {
		return nil, fmt.Errorf("fixed-width column not wrapped in nullable: %w", ErrUnsupported)
	}
	if enc.Nullability == lancepb.AllNulls {
		return array.MakeArrayOfNull(mem, dt, n), nil
	}
	var validity []byte
	nulls := 0
	if enc.Nullability == lancepb.SomeNulls {
		if validity, nulls, err = p.validity(enc.Validity, n); err != nil {
			return nil, err
		}
	}
	valueBits := uint64(bitsPerValue(dt))
	v := enc.Values
	flat := v
	var itemValidity []byte
	if v.Kind == lancepb.EncFixedSizeList {
		if flat, itemValidity, err = p.listItems(v, valueBits); err != nil {
			return nil, err
		}
	} else if v.Kind != lancepb.EncFlat || v.BitsPerValue != valueBits {
		return nil, fmt.Errorf("flat layout of %d bits does not match %s: %w", v.BitsPerValue, dt, ErrUnsupported)
	}
	values, err := p.buf(flat)
	if err != nil {
		return nil, err
	}
	if uint64(len(values))*8 < valueBits*uint64(n) {
		return nil, fmt.Errorf("values of %d bytes for %d rows of %s: %w", len(values), n, dt, ErrCorrupt)
	}
	arr := fixedArray(dt, n, validity, nulls, values)
	if itemValidity != nil {
		defer arr.Release()
		return withItemValidity(arr, itemValidity), nil
	}
	return arr, nil
}

// page20 holds what the decoders of one 2.0 page share.
type page20 struct {
	bufs [][]byte
	n    int
	dt   arrow.DataType
	mem  memory.Allocator
}

func (p *page20) buf(a *lancepb.ArrayEncoding) ([]byte, error) {
	if int(a.BufferIndex) >= len(p.bufs) {
		return nil, fmt.Errorf("buffer %d of %d: %w", a.BufferIndex, len(p.bufs), ErrCorrupt)
	}
	if a.Compression != "" {
		return generalDecompress(a.Compression, p.bufs[a.BufferIndex])
	}
	return p.bufs[a.BufferIndex], nil
}

// validity returns the bitmap of n values in a flat 1-bit buffer and the
// nulls it marks.
func (p *page20) validity(a *lancepb.ArrayEncoding, n int) ([]byte, int, error) {
	if a.Kind != lancepb.EncFlat || a.BitsPerValue != 1 {
		return nil, 0, fmt.Errorf("validity of kind %d and %d bits: %w", a.Kind, a.BitsPerValue, ErrUnsupported)
	}
	v, err := p.buf(a)
	if err != nil {
		return nil, 0, err
	}
	if len(v) < (n+7)/8 {
		return nil, 0, fmt.Errorf("validity of %d bytes for %d values: %w", len(v), n, ErrCorrupt)
	}
	return v, n - bitutil.CountSetBits(v, 0, n), nil
}

// listItems returns the flat encoding of a fixed_size_list's items and,
// when the official writer gave the items their own validity, its bitmap.
func (p *page20) listItems(v *lancepb.ArrayEncoding, valueBits uint64) (*lancepb.ArrayEncoding, []byte, error) {
	flat := v.Items
	var validity []byte
	if flat.Kind == lancepb.EncNullable {
		switch flat.Nullability {
		case lancepb.NoNulls:
			flat = flat.Values
		case lancepb.SomeNulls:
			var err error
			if validity, _, err = p.validity(flat.Validity, p.n*int(v.Dimension)); err != nil {
				return nil, nil, err
			}
			flat = flat.Values
		}
	}
	if flat.Kind != lancepb.EncFlat || flat.BitsPerValue*uint64(v.Dimension) != valueBits {
		return nil, nil, fmt.Errorf("fixed_size_list layout (dim %d, items kind %d of %d bits) does not match %s: %w", v.Dimension, flat.Kind, flat.BitsPerValue, p.dt, ErrUnsupported)
	}
	return flat, validity, nil
}

// binary decodes a binary{u64 end offsets, bytes} encoding of n values.
func (p *page20) binary(enc *lancepb.ArrayEncoding, n int) (arrow.Array, error) {
	if enc.Kind != lancepb.EncBinary || enc.Indices.Kind != lancepb.EncNullable || enc.Indices.Nullability != lancepb.NoNulls || enc.Indices.Values.Kind != lancepb.EncFlat || enc.Indices.Values.BitsPerValue != 64 {
		return nil, fmt.Errorf("binary column with a layout other than u64 indices: %w", ErrUnsupported)
	}
	idx, err := p.buf(enc.Indices.Values)
	if err != nil {
		return nil, err
	}
	data, err := p.buf(enc.Bytes)
	if err != nil {
		return nil, err
	}
	return binaryFromEnds(idx, data, enc.NullAdjustment, n, p.dt, p.mem)
}

// dictionary decodes the official writer's dictionary of strings: u8
// indices (0 a null row, k item k-1) into binary items.
func (p *page20) dictionary(enc *lancepb.ArrayEncoding) (arrow.Array, error) {
	ix := enc.Indices
	if ix.Kind == lancepb.EncNullable && ix.Nullability == lancepb.NoNulls {
		ix = ix.Values
	}
	if ix.Kind != lancepb.EncFlat || ix.BitsPerValue != 8 || enc.NumDictionaryItems > 255 {
		return nil, fmt.Errorf("dictionary of %d items with %d-bit indices: %w", enc.NumDictionaryItems, ix.BitsPerValue, ErrUnsupported)
	}
	indices, err := p.buf(ix)
	if err != nil {
		return nil, err
	}
	if len(indices) < p.n {
		return nil, fmt.Errorf("%d dictionary indices for %d rows: %w", len(indices), p.n, ErrCorrupt)
	}
	items, err := p.binary(enc.Items, int(enc.NumDictionaryItems))
	if err != nil {
		return nil, fmt.Errorf("dictionary items: %w", err)
	}
	defer items.Release()
	return takeBinary(items.(array.BinaryLike), p.n, p.dt, func(i int) int { return int(indices[i]) - 1 })
}

// takeBinary builds n values of type dt from items: row i is item at(i),
// or null when at(i) is -1.
func takeBinary(items array.BinaryLike, n int, dt arrow.DataType, at func(int) int) (arrow.Array, error) {
	offs := make([]int64, n+1)
	validity := make([]byte, (n+7)/8)
	var data []byte
	nulls := 0
	for i := range n {
		k := at(i)
		switch {
		case k == -1:
			nulls++
		case k < 0 || k >= items.Len():
			return nil, fmt.Errorf("dictionary index %d of %d items: %w", k, items.Len(), ErrCorrupt)
		default:
			bitutil.SetBit(validity, i)
			o := items.ValueOffset64(k)
			data = append(data, items.ValueBytes()[o:o+int64(items.ValueLen(k))]...)
		}
		offs[i+1] = int64(len(data))
	}
	return binaryArray(dt, offs, data, validity, nulls)
}

// withItemValidity returns a copy of the fixed_size_list arr whose items
// carry the validity bitmap items.
func withItemValidity(arr arrow.Array, items []byte) arrow.Array {
	d := arr.Data()
	c := d.Children()[0]
	n := c.Len()
	nulls := n - bitutil.CountSetBits(items, 0, n)
	child := array.NewData(c.DataType(), n, []*memory.Buffer{memory.NewBufferBytes(items), c.Buffers()[1]}, nil, nulls, 0)
	defer child.Release()
	out := array.NewData(d.DataType(), d.Len(), d.Buffers(), []arrow.ArrayData{child}, d.NullN(), 0)
	defer out.Release()
	return array.MakeFromData(out)
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
