package lancefile

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// Full-zip pages (file format 2.1) store each value whole, one after the
// other in buffer 0. With nulls in the page every value is preceded by a
// one-byte control word holding its definition level (bits_def = 1). A
// fixed-width null still occupies its value's bytes, so rows keep a fixed
// stride; a variable-width value is its length (u32, u64 for large types)
// and bytes, and a null is the control word alone. Variable-width pages add
// buffer 1, the repetition index: rows+1 byte positions of each row's start
// (the last is the buffer's size), each 1, 2, 4 or 8 bytes wide, a width
// the reader infers from the buffer size.

// fullZipFixed writes a page of wide fixed-width values (vectors).
func (w *Writer) fullZipFixed(col int, arr arrow.Array, start, n int, rowStart uint64, nullable bool) error {
	values, err := fixedValues(arr, start, n)
	if err != nil {
		return err
	}
	dt := arr.DataType()
	width := bitsPerValue(dt) / 8
	off := w.pos
	if !nullable {
		if err := w.raw(values); err != nil {
			return err
		}
	} else {
		ctrl := []byte{0}
		for i := range n {
			ctrl[0] = 0
			if arr.IsNull(start + i) {
				ctrl[0] = 1
			}
			if err := w.raw(ctrl); err != nil {
				return err
			}
			if err := w.raw(values[i*width : (i+1)*width]); err != nil {
				return err
			}
		}
	}
	size := w.pos - off
	if err := w.rawPadded64(); err != nil {
		return err
	}
	pl := &lancepb.PageLayout{
		Kind: lancepb.LayoutFullZip, BitsPerValue: uint64(8 * width), NumItems: uint64(n), NumVisibleItems: uint64(n),
		Value: valueEncoding21(dt), Layers: []lancepb.RepDefLayer{lancepb.LayerAllValidItem},
	}
	if nullable {
		pl.BitsDef, pl.Layers[0] = 1, lancepb.LayerNullableItem
	}
	w.addPage21(col, rowStart, n, pl, []uint64{off}, []uint64{size})
	return nil
}

// fullZipVariable writes a page of variable-width values, some of them at
// least fullZipMinBytes long.
func (w *Writer) fullZipVariable(col int, arr arrow.Array, start, n int, rowStart uint64, nullable bool) error {
	ob := offsetBits(arr.DataType())
	scratch := w.grow(16*n + 8)
	ends := arrow.Uint64Traits.CastFromBytes(scratch[:8*n])
	binaryEnds(arr, start, n, ends)
	// Row start positions are computed first so that the index width is
	// known; the index is then packed in place over them.
	rowPos := arrow.Uint64Traits.CastFromBytes(scratch[8*n : 16*n+8])
	z := fullZipRows{arr: arr, start: start, ends: ends, nullable: nullable, lenWidth: ob / 8}
	total := z.positions(rowPos)
	off := w.pos
	if err := z.write(w); err != nil {
		return err
	}
	if err := w.rawPadded64(); err != nil {
		return err
	}
	idx := packRowIndex(scratch[8*n:], rowPos, total)
	idxOff, idxSize, err := w.writeBuffer(idx)
	if err != nil {
		return err
	}
	pl := &lancepb.PageLayout{
		Kind: lancepb.LayoutFullZip, BitsPerOffset: uint64(ob), NumItems: uint64(n), NumVisibleItems: uint64(n),
		Value: variableEncoding21(uint64(ob)), Layers: []lancepb.RepDefLayer{lancepb.LayerAllValidItem},
	}
	if nullable {
		pl.BitsDef, pl.Layers[0] = 1, lancepb.LayerNullableItem
	}
	w.addPage21(col, rowStart, n, pl, []uint64{off, idxOff}, []uint64{total, idxSize})
	return nil
}

// fullZipRows are the rows [start, start+len(ends)) of a variable-width
// array as a full-zip page lays them out: per row an optional control
// byte (1 = null), then for a valid row its length in lenWidth bytes and
// its bytes.
type fullZipRows struct {
	arr      arrow.Array
	start    int
	ends     []uint64
	nullable bool
	lenWidth int
}

func (z *fullZipRows) valid(i int) bool { return !z.nullable || !z.arr.IsNull(z.start+i) }

// positions fills rowPos[i] with the byte where row i starts and
// rowPos[len(ends)] with the end; it returns the page's size.
func (z *fullZipRows) positions(rowPos []uint64) uint64 {
	var pos, prevEnd uint64
	for i, e := range z.ends {
		rowPos[i] = pos
		if z.nullable {
			pos++
		}
		if z.valid(i) {
			pos += uint64(z.lenWidth) + e - prevEnd
		}
		prevEnd = e
	}
	rowPos[len(z.ends)] = pos
	return pos
}

// write writes the rows to w.
func (z *fullZipRows) write(w *Writer) error {
	data := binaryData(z.arr, z.start, len(z.ends))
	var word [9]byte
	var prevEnd uint64
	for i, e := range z.ends {
		h := 0
		if z.nullable {
			word[0] = byte(btoi(!z.valid(i)))
			h = 1
		}
		if z.valid(i) {
			if z.lenWidth == 8 {
				binary.LittleEndian.PutUint64(word[h:], e-prevEnd)
			} else {
				binary.LittleEndian.PutUint32(word[h:], uint32(e-prevEnd))
			}
			h += z.lenWidth
		}
		if err := w.raw(word[:h]); err != nil {
			return err
		}
		if z.valid(i) {
			if err := w.raw(data[prevEnd:e]); err != nil {
				return err
			}
		}
		prevEnd = e
	}
	return nil
}

// packRowIndex packs rowPos into the narrowest width that holds total,
// in place at the start of buf (buf aliases rowPos: packing forward never
// overwrites an entry not yet read), and returns the packed bytes.
func packRowIndex(buf []byte, rowPos []uint64, total uint64) []byte {
	idxWidth := 8
	switch {
	case total <= 0xff:
		idxWidth = 1
	case total <= 0xffff:
		idxWidth = 2
	case total <= 0xffffffff:
		idxWidth = 4
	}
	idx := buf[:idxWidth*len(rowPos)]
	for i, p := range rowPos {
		putWord(idx, idxWidth, i, p)
	}
	return idx
}
