package lancefile

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// File format 2.1 pages ("structural" encodings, lance.encodings21). walctl
// writes them uncompressed, in the layouts the official writer picks for the
// same data:
//
//   - all-null layout when every row of the page is null (no buffers);
//   - full-zip layout when a value is fullZipMinBytes or wider (vectors of
//     64+ float32, binaries of 256+ bytes): each value is stored whole,
//     preceded by a one-byte definition level when the page has nulls;
//   - mini-block layout otherwise: the values are cut into chunks of a
//     power-of-two count (except the last) and at most 32 KiB, each chunk
//     carrying its own definition levels.
//
// A page without nulls has a single "all valid item" layer and no
// definition levels; a page with nulls has a "nullable item" layer whose
// definition level is 0 for a value and 1 for a null.

const (
	// fullZipMinBytes is the value size from which a page uses the
	// full-zip layout (the official writer's cut-off, "not narrow").
	fullZipMinBytes = 256
	// miniBlockMaxValues bounds the values of one chunk (official limit).
	miniBlockMaxValues = 4096
	// miniBlockFixedBytes bounds the value bytes of a fixed-width chunk and
	// miniBlockVarBytes the value buffer of a variable-width chunk; with
	// their definition levels chunks stay far below the 32 KiB a chunk's
	// 12-bit size word can express.
	miniBlockFixedBytes = 8186
	miniBlockVarBytes   = 4096
	miniBlockMaxBytes   = 32 << 10
	miniBlockAlign      = 8
)

// page21 writes rows [start, start+n) of arr as one file-format-2.1 page.
func (w *Writer) page21(col int, arr arrow.Array, start, n int) error {
	rowStart := w.rows + uint64(start)
	nulls := nullCount(arr, start, n)
	layer := lancepb.LayerAllValidItem
	if nulls > 0 {
		layer = lancepb.LayerNullableItem
	}
	if nulls == n {
		pl := &lancepb.PageLayout{Kind: lancepb.LayoutAllNull, Layers: []lancepb.RepDefLayer{layer}}
		w.addPage21(col, rowStart, n, pl, nil, nil)
		return nil
	}
	dt := arr.DataType()
	if isBinary(dt) {
		if maxValueLen(arr, start, n) >= fullZipMinBytes {
			return w.fullZipVariable(col, arr, start, n, rowStart, nulls > 0)
		}
		return w.miniBlockVariable(col, arr, start, n, rowStart, nulls > 0)
	}
	if bitsPerValue(dt) >= 8*fullZipMinBytes {
		return w.fullZipFixed(col, arr, start, n, rowStart, nulls > 0)
	}
	return w.miniBlockFixed(col, arr, start, n, rowStart, nulls > 0)
}

func (w *Writer) addPage21(col int, rowStart uint64, n int, pl *lancepb.PageLayout, offs, sizes []uint64) {
	w.addPage(col, rowStart, n, lancepb.EncodeAny(lancepb.TypeURLPageLayout21, pl.Encode()), offs, sizes)
}

// valueEncoding21 describes the values of a fixed-width type.
func valueEncoding21(dt arrow.DataType) *lancepb.Compressive {
	if fsl, ok := dt.(*arrow.FixedSizeListType); ok {
		return &lancepb.Compressive{
			Kind: lancepb.CompFixedSizeList, ItemsPerValue: uint64(fsl.Len()),
			Values: lancepb.Flat21(uint64(bitsPerValue(fsl.Elem()))),
		}
	}
	return lancepb.Flat21(uint64(bitsPerValue(dt)))
}

// variableEncoding21 describes uncompressed variable-width values whose
// offsets (or lengths) are offsetBits wide.
func variableEncoding21(offsetBits uint64) *lancepb.Compressive {
	return &lancepb.Compressive{Kind: lancepb.CompVariable, Offsets: lancepb.Flat21(offsetBits)}
}

func offsetBits(dt arrow.DataType) int {
	switch dt.ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return 64
	}
	return 32
}

// maxValueLen returns the longest value among rows [start, start+n).
func maxValueLen(arr arrow.Array, start, n int) int64 {
	var longest int64
	off := arr.Data().Offset() + start
	switch o := arr.Data().Buffers()[1]; {
	case o == nil:
	case offsetBits(arr.DataType()) == 64:
		offs := arrow.Int64Traits.CastFromBytes(o.Bytes())[off : off+n+1]
		for i := range n {
			longest = max(longest, offs[i+1]-offs[i])
		}
	default:
		offs := arrow.Int32Traits.CastFromBytes(o.Bytes())[off : off+n+1]
		for i := range n {
			longest = max(longest, int64(offs[i+1]-offs[i]))
		}
	}
	return longest
}

// defLevels fills dst (2 bytes per row) with the u16 definition levels of
// rows [start, start+n): 0 for a value, 1 for a null.
func defLevels(arr arrow.Array, start, n int, dst []byte) []byte {
	dst = dst[:2*n]
	clear(dst)
	for i := range n {
		if arr.IsNull(start + i) {
			dst[2*i] = 1
		}
	}
	return dst
}

// pad8 returns n rounded up to the mini-block alignment.
func pad8(n int) int { return (n + miniBlockAlign - 1) &^ (miniBlockAlign - 1) }

// miniBlockPage accumulates the chunk metadata of one mini-block page while
// its chunks stream to the file.
type miniBlockPage struct {
	start uint64
	meta  []byte
	defs  bool
}

func (w *Writer) beginMiniBlock(defs bool) *miniBlockPage {
	return &miniBlockPage{start: w.pos, meta: w.meta[:0], defs: defs}
}

// putChunk writes one chunk of count values: a header (u16 level count,
// u16 size of the definition levels if any, u16 size of the value buffer),
// the levels and the value parts, each padded to 8 bytes.
func (w *Writer) putChunk(p *miniBlockPage, count int, last bool, def []byte, value ...[]byte) error {
	var valueSize int
	for _, v := range value {
		valueSize += len(v)
	}
	var hdr [miniBlockAlign]byte
	h := 2
	if p.defs {
		binary.LittleEndian.PutUint16(hdr[0:], uint16(count))
		binary.LittleEndian.PutUint16(hdr[2:], uint16(len(def)))
		h = 4
	}
	binary.LittleEndian.PutUint16(hdr[h:], uint16(valueSize))
	size := miniBlockAlign + pad8(len(def)) + pad8(valueSize)
	if size > miniBlockMaxBytes || valueSize > 0xffff {
		return fmt.Errorf("mini-block chunk of %d values is %d bytes (at most %d): %w", count, size, miniBlockMaxBytes, ErrUnsupported)
	}
	if err := w.raw(hdr[:]); err != nil {
		return err
	}
	if p.defs {
		if err := w.rawPadded(def); err != nil {
			return err
		}
	}
	for _, v := range value {
		if err := w.raw(v); err != nil {
			return err
		}
	}
	if err := w.raw(padding[:pad8(valueSize)-valueSize]); err != nil {
		return err
	}
	logCount := 0
	if !last {
		logCount = bits.TrailingZeros(uint(count))
	}
	p.meta = binary.LittleEndian.AppendUint16(p.meta, uint16((size/miniBlockAlign-1)<<4|logCount))
	return nil
}

// finishMiniBlock pads the chunk buffer, writes the metadata buffer and adds
// the page: buffer 0 is the metadata, buffer 1 the chunks.
func (w *Writer) finishMiniBlock(p *miniBlockPage, col int, rowStart uint64, n int, value *lancepb.Compressive) error {
	size := w.pos - p.start
	if err := w.rawPadded64(); err != nil {
		return err
	}
	w.meta = p.meta
	metaOff, metaSize, err := w.writeBuffer(p.meta)
	if err != nil {
		w.err = err
		return err
	}
	pl := &lancepb.PageLayout{
		Kind: lancepb.LayoutMiniBlock, Value: value, NumBuffers: 1, NumItems: uint64(n),
		Layers: []lancepb.RepDefLayer{lancepb.LayerAllValidItem},
	}
	if p.defs {
		pl.Def = lancepb.Flat21(16)
		pl.Layers[0] = lancepb.LayerNullableItem
	}
	w.addPage21(col, rowStart, n, pl, []uint64{metaOff, p.start}, []uint64{metaSize, size})
	return nil
}

// miniBlockFixed writes a fixed-width page (booleans, numbers, dates,
// timestamps, fixed-size binaries and lists) as mini-block chunks of
// perChunk values.
func (w *Writer) miniBlockFixed(col int, arr arrow.Array, start, n int, rowStart uint64, nullable bool) error {
	dt := arr.DataType()
	bitsPer := bitsPerValue(dt)
	perChunk := miniBlockMaxValues
	for perChunk*bitsPer > 8*miniBlockFixedBytes {
		perChunk /= 2
	}
	var values []byte
	var boolBits []byte
	boolOff := 0
	if dt.ID() == arrow.BOOL {
		boolBits, boolOff = arr.Data().Buffers()[1].Bytes(), arr.Data().Offset()+start
	} else {
		var err error
		if values, err = fixedValues(arr, start, n); err != nil {
			return err
		}
	}
	scratch := w.grow(2*perChunk + perChunk/8)
	p := w.beginMiniBlock(nullable)
	for c := 0; c < n; c += perChunk {
		count := min(perChunk, n-c)
		var def []byte
		if nullable {
			def = defLevels(arr, start+c, count, scratch)
		}
		var chunk []byte
		if boolBits != nil {
			chunk = bitsAt(boolBits, boolOff+c, count, scratch[2*perChunk:])
		} else {
			chunk = values[c*bitsPer/8 : (c+count)*bitsPer/8]
		}
		if err := w.putChunk(p, count, c+count == n, def, chunk); err != nil {
			return err
		}
	}
	return w.finishMiniBlock(p, col, rowStart, n, valueEncoding21(dt))
}

// miniBlockVariable writes a variable-width page whose values are all
// shorter than fullZipMinBytes. A chunk's value buffer is its offsets
// (count+1 of them, relative to the buffer's start, so the first is the
// offsets' own size) followed by the value bytes, padded to the offset
// width.
func (w *Writer) miniBlockVariable(col int, arr arrow.Array, start, n int, rowStart uint64, nullable bool) error {
	ob := offsetBits(arr.DataType())
	width := ob / 8
	ends := w.grow(8*n + 2*miniBlockMaxValues + width*(miniBlockVarBytes/4+1))
	endsU := arrow.Uint64Traits.CastFromBytes(ends[:8*n])
	binaryEnds(arr, start, n, endsU)
	scratch := ends[8*n:]
	data := binaryData(arr, start, n)
	end := func(i int) uint64 { // end offset of row i-1; end(0) = 0
		if i == 0 {
			return 0
		}
		return endsU[i-1]
	}
	chunkBytes := func(c, k int) int { return (k+1)*width + int(end(c+k)-end(c)) }
	p := w.beginMiniBlock(nullable)
	for c := 0; c < n; {
		k := n - c
		if chunkBytes(c, k) > miniBlockVarBytes {
			k = 1
			for 2*k < n-c && chunkBytes(c, 2*k) <= miniBlockVarBytes {
				k *= 2
			}
		}
		var def []byte
		if nullable {
			def = defLevels(arr, start+c, k, scratch)
		}
		offs := scratch[2*miniBlockMaxValues : 2*miniBlockMaxValues+(k+1)*width]
		base := uint64((k + 1) * width)
		for i := 0; i <= k; i++ {
			o := base + end(c+i) - end(c)
			if width == 8 {
				binary.LittleEndian.PutUint64(offs[8*i:], o)
			} else {
				binary.LittleEndian.PutUint32(offs[4*i:], uint32(o))
			}
		}
		vals := data[end(c):end(c+k)]
		size := len(offs) + len(vals)
		pad := (width - size%width) % width
		if err := w.putChunk(p, k, c+k == n, def, offs, vals, padding[:pad]); err != nil {
			return err
		}
		c += k
	}
	return w.finishMiniBlock(p, col, rowStart, n, variableEncoding21(uint64(ob)))
}
