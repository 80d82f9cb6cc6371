package lancefile

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// page20 writes rows [start, start+n) of arr as one file-format-2.0 page:
//
//	fixed width: nullable{no_nulls{values}} or nullable{some_nulls{validity, values}}
//	             where values is flat{bits} or fixed_size_list{dim, flat{item bits}}
//	binary:      binary{indices: nullable{no_nulls{flat u64 end offsets}}, bytes: flat 8,
//	             null_adjustment}; a null row's end offset has null_adjustment added.
func (w *Writer) page20(col int, arr arrow.Array, start, n int) error {
	rowStart := w.rows + uint64(start)
	dt := arr.DataType()
	if isBinary(dt) {
		return w.binaryPage20(col, arr, start, n, rowStart)
	}
	nulls := nullCount(arr, start, n)
	var bufs [][]byte
	var validityBits []byte
	scratchBits := (n + 7) / 8
	scratch := w.grow(2 * scratchBits)
	if nulls > 0 {
		validityBits = bitsAt(arr.NullBitmapBytes(), arr.Data().Offset()+start, n, scratch[:scratchBits])
		bufs = append(bufs, validityBits)
	}
	var values []byte
	var valueEnc *lancepb.ArrayEncoding
	idx := uint32(len(bufs))
	if dt.ID() == arrow.BOOL {
		values = bitsAt(arr.Data().Buffers()[1].Bytes(), arr.Data().Offset()+start, n, scratch[scratchBits:])
		valueEnc = lancepb.Flat20(1, idx)
	} else {
		var err error
		if values, err = fixedValues(arr, start, n); err != nil {
			return err
		}
		if fsl, ok := dt.(*arrow.FixedSizeListType); ok {
			valueEnc = &lancepb.ArrayEncoding{
				Kind: lancepb.EncFixedSizeList, Dimension: uint32(fsl.Len()),
				Items: lancepb.Flat20(uint64(bitsPerValue(fsl.Elem())), idx),
			}
		} else {
			valueEnc = lancepb.Flat20(uint64(bitsPerValue(dt)), idx)
		}
	}
	bufs = append(bufs, values)
	enc := &lancepb.ArrayEncoding{Kind: lancepb.EncNullable, Nullability: lancepb.NoNulls, Values: valueEnc}
	if nulls > 0 {
		enc.Nullability = lancepb.SomeNulls
		enc.Validity = lancepb.Flat20(1, 0)
	}
	return w.emit20(col, rowStart, n, enc, bufs)
}

func (w *Writer) binaryPage20(col int, arr arrow.Array, start, n int, rowStart uint64) error {
	scratch := w.grow(8 * n)
	ends := arrow.Uint64Traits.CastFromBytes(scratch)
	binaryEnds(arr, start, n, ends)
	adj := ends[n-1] + 1
	if nullCount(arr, start, n) > 0 {
		for i := range n {
			if arr.IsNull(start + i) {
				ends[i] += adj
			}
		}
	}
	enc := &lancepb.ArrayEncoding{
		Kind: lancepb.EncBinary,
		Indices: &lancepb.ArrayEncoding{
			Kind: lancepb.EncNullable, Nullability: lancepb.NoNulls, Values: lancepb.Flat20(64, 0),
		},
		Bytes:          lancepb.Flat20(8, 1),
		NullAdjustment: adj,
	}
	return w.emit20(col, rowStart, n, enc, [][]byte{scratch, binaryData(arr, start, n)})
}

func (w *Writer) emit20(col int, rowStart uint64, n int, enc *lancepb.ArrayEncoding, bufs [][]byte) error {
	offs := make([]uint64, len(bufs))
	sizes := make([]uint64, len(bufs))
	for i, b := range bufs {
		off, size, err := w.writeBuffer(b)
		if err != nil {
			return err
		}
		offs[i], sizes[i] = off, size
	}
	w.addPage(col, rowStart, n, lancepb.EncodeAny(lancepb.TypeURLArrayEncoding, enc.Encode()), offs, sizes)
	return nil
}
