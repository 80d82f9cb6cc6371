package lancefile

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// miniBlockMaxCount is the most values a chunk's 4-bit log2 can announce.
const miniBlockMaxCount = 1 << 15

// miniBlock decodes the chunks of one mini-block page.
type miniBlock struct {
	pl    *lancepb.PageLayout
	v     *lancepb.Compressive // pl.Value without general compression and FSST
	dt    arrow.DataType
	b     *builder21
	bits  int // bits per fixed-width value (of an index for a dictionary)
	width int // bytes per offset of variable-width values
	fsst  *fsstTable
	dict  *dictionary21
	// general names the compression of each chunk's first buffer.
	general string
}

// decodeMiniBlock decodes buffer 1's chunks as described by buffer 0's
// u16 words ((8-byte words - 1) << 4 | log2 values; the last chunk holds
// the rest of the page); buffer 2 holds a dictionary page's items.
func decodeMiniBlock(pl *lancepb.PageLayout, bufs [][]byte, n int, dt arrow.DataType) (arrow.Array, error) {
	switch {
	case pl.Rep != nil || pl.RepIndexDepth > 0:
		return nil, fmt.Errorf("mini-block page with repetition levels: %w", ErrUnsupported)
	case pl.HasLargeChunk:
		return nil, fmt.Errorf("mini-block page with large (2.2) chunks: %w", ErrUnsupported)
	case pl.Value == nil:
		return nil, fmt.Errorf("mini-block page without a value encoding: %w", ErrCorrupt)
	case pl.NumBuffers < 1 || pl.NumBuffers > 2:
		return nil, fmt.Errorf("mini-block page with %d buffers per chunk: %w", pl.NumBuffers, ErrUnsupported)
	case pl.NumItems != uint64(n) || len(bufs) < 2 || len(bufs[0])%2 != 0:
		return nil, fmt.Errorf("mini-block page of %d items for %d rows with %d buffers: %w", pl.NumItems, n, len(bufs), ErrCorrupt)
	}
	meta, chunks := bufs[0], bufs[1]
	if n > len(meta)/2*miniBlockMaxCount {
		return nil, fmt.Errorf("%d chunks cannot hold %d rows: %w", len(meta)/2, n, ErrCorrupt)
	}
	m, err := newMiniBlock(pl, bufs, n, dt)
	if err != nil {
		return nil, err
	}
	for w := 0; w < len(meta); w += 2 {
		word := binary.LittleEndian.Uint16(meta[w:])
		size := (int(word>>4) + 1) * miniBlockAlign
		count := 1 << (word & 0xf)
		if w == len(meta)-2 {
			count = n - m.b.row
		}
		if count <= 0 || m.b.row+count > n || size > len(chunks) {
			return nil, fmt.Errorf("mini-block chunk %d (%d values, %d bytes) overruns the page: %w", w/2, count, size, ErrCorrupt)
		}
		if err := m.chunk(chunks[:size], count); err != nil {
			return nil, fmt.Errorf("mini-block chunk %d: %w", w/2, err)
		}
		chunks = chunks[size:]
	}
	return m.b.finish()
}

func newMiniBlock(pl *lancepb.PageLayout, bufs [][]byte, n int, dt arrow.DataType) (*miniBlock, error) {
	m := &miniBlock{pl: pl, dt: dt}
	v := pl.Value
	if what := v.Unsupported(); what != "" {
		return nil, fmt.Errorf("%s: %w", what, ErrUnsupported)
	}
	if v.Kind == lancepb.CompGeneral {
		m.general, v = v.Scheme, v.Inner
	}
	if v.Kind == lancepb.CompFsst {
		t, err := parseFsstTable(v.SymbolTable)
		if err != nil {
			return nil, err
		}
		m.fsst, v = t, v.Inner
	}
	if pl.Dictionary != nil {
		d, err := newDictionary21(pl, bufs, dt)
		if err != nil {
			return nil, err
		}
		m.dict = d
	}
	switch {
	case v.Kind == lancepb.CompVariable && isBinary(dt) && m.dict == nil:
		m.width = int(v.Offsets.BitsPerValue) / 8
		if m.width != 4 && m.width != 8 {
			return nil, fmt.Errorf("variable values with %d-bit offsets: %w", v.Offsets.BitsPerValue, ErrUnsupported)
		}
	case v.Kind != lancepb.CompVariable && m.fsst == nil:
		m.bits = fixedBits21(v)
		want := bitsPerValue(dt)
		if m.dict != nil {
			want = m.bits // indices
		}
		if m.bits != want || m.bits == 0 || (m.bits > 1 && m.bits%8 != 0) {
			return nil, fmt.Errorf("values of %d bits (%s) do not match %s: %w", m.bits, describe21(v), dt, ErrUnsupported)
		}
		if (m.dict != nil || (v.Kind != lancepb.CompFlat && v.Kind != lancepb.CompFixedSizeList)) && !wordBits(m.bits) {
			return nil, fmt.Errorf("%s of %d-bit values: %w", describe21(v), m.bits, ErrUnsupported)
		}
	default:
		return nil, fmt.Errorf("%s column encoded as %s: %w", dt, describe21(pl.Value), ErrUnsupported)
	}
	m.v = v
	bits := m.bits
	if m.dict != nil || m.width > 0 {
		bits = 0
	}
	m.b = newBuilder21(dt, bits, n)
	return m, nil
}

// wordBits reports whether bits is the width of a machine word, which
// bit-packing, RLE and dictionary indices require.
func wordBits(bits int) bool { return bits == 8 || bits == 16 || bits == 32 || bits == 64 }

// fixedBits21 returns the width of the values a fixed-width encoding
// decodes to.
func fixedBits21(c *lancepb.Compressive) int {
	switch c.Kind {
	case lancepb.CompFlat:
		return int(c.BitsPerValue)
	case lancepb.CompInlineBits, lancepb.CompOutOfLineBits:
		return int(c.UncompressedBits)
	case lancepb.CompRle, lancepb.CompByteSplit:
		return int(c.Inner.BitsPerValue)
	case lancepb.CompFixedSizeList:
		return int(c.Values.BitsPerValue * c.ItemsPerValue)
	}
	return 0
}

// chunk21 is one parsed mini-block chunk.
type chunk21 struct {
	levels int
	def    []byte
	bufs   [][]byte
}

// parseChunk splits a chunk: u16 level count, u16 size of the definition
// levels (when the page has them) and of each buffer, padding to 8, then
// each part padded to 8.
func parseChunk(chunk []byte, hasDef bool, nbufs int) (chunk21, error) {
	var c chunk21
	nsizes := btoi(hasDef) + nbufs
	header := pad8(2 + 2*nsizes)
	if len(chunk) < header {
		return c, fmt.Errorf("chunk of %d bytes: %w", len(chunk), ErrCorrupt)
	}
	c.levels = int(binary.LittleEndian.Uint16(chunk))
	pos := header
	for i := range nsizes {
		size := int(binary.LittleEndian.Uint16(chunk[2+2*i:]))
		if pos+size > len(chunk) {
			return c, fmt.Errorf("chunk buffers overrun its %d bytes: %w", len(chunk), ErrCorrupt)
		}
		part := chunk[pos : pos+size]
		pos += pad8(size)
		if hasDef && i == 0 {
			c.def = part
		} else {
			c.bufs = append(c.bufs, part)
		}
	}
	return c, nil
}

// chunk decodes the count values of one chunk into m.b.
func (m *miniBlock) chunk(raw []byte, count int) error {
	c, err := parseChunk(raw, m.pl.Def != nil, int(m.pl.NumBuffers))
	if err != nil {
		return err
	}
	if m.general != "" {
		if c.bufs[0], err = generalDecompress(m.general, c.bufs[0]); err != nil {
			return err
		}
	}
	var def []byte
	if m.pl.Def != nil {
		if c.levels != count {
			return fmt.Errorf("%d levels for %d values: %w", c.levels, count, ErrCorrupt)
		}
		if def, err = levels16(m.pl.Def, c.def, count); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
	}
	valid := func(i int) bool { return def == nil || binary.LittleEndian.Uint16(def[2*i:]) == 0 }
	for i := range count {
		m.b.setValid(i, valid(i))
	}
	if m.width > 0 {
		return m.variable(c.bufs[0], count)
	}
	if m.v.Kind == lancepb.CompFixedSizeList && m.v.HasValidity {
		if len(c.bufs) != 2 {
			return fmt.Errorf("fixed_size_list chunk with item validity in %d buffers: %w", len(c.bufs), ErrCorrupt)
		}
		if err := m.b.itemValidity(c.bufs[0], count); err != nil {
			return err
		}
		c.bufs = c.bufs[1:]
	}
	values, err := m.fixed(c.bufs, count)
	if err != nil {
		return err
	}
	if m.dict != nil {
		return m.dict.take(m.b, values, m.bits/8, count, valid)
	}
	return m.b.fixed(values, count)
}

// fixed decodes count fixed-width values (bit-packed for booleans).
func (m *miniBlock) fixed(bufs [][]byte, count int) ([]byte, error) {
	v := m.v
	switch v.Kind {
	case lancepb.CompInlineBits:
		return inlineBitpacked(bufs[0], m.bits, count)
	case lancepb.CompOutOfLineBits:
		return outOfLineBitpacked(bufs[0], m.bits, int(v.BitsPerValue), count)
	case lancepb.CompRle:
		if len(bufs) != 2 {
			return nil, fmt.Errorf("rle chunk with %d buffers: %w", len(bufs), ErrCorrupt)
		}
		return runLengthDecoded(bufs[0], bufs[1], m.bits/8, count)
	case lancepb.CompByteSplit:
		return byteStreamJoined(bufs[0], m.bits/8, count)
	}
	return bufs[0], nil
}

// variable appends the count values of a variable-width chunk buffer:
// count+1 offsets (relative to the buffer) followed by the bytes, each
// value FSST-decompressed when the page says so.
func (m *miniBlock) variable(buf []byte, count int) error {
	width := m.width
	if len(buf) < (count+1)*width {
		return fmt.Errorf("%d bytes for %d offsets: %w", len(buf), count+1, ErrCorrupt)
	}
	prev := getWord(buf, width, 0)
	var scratch []byte
	for i := 1; i <= count; i++ {
		o := getWord(buf, width, i)
		if o < prev || o > uint64(len(buf)) {
			return fmt.Errorf("offset %d out of order or beyond %d bytes: %w", o, len(buf), ErrCorrupt)
		}
		v := buf[prev:o]
		if m.fsst != nil {
			var err error
			if scratch, err = m.fsst.decode(scratch[:0], v); err != nil {
				return err
			}
			v = scratch
		}
		m.b.variable(v)
		prev = o
	}
	return nil
}
