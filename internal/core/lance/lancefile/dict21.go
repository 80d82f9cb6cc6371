package lancefile

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// dictionary21 holds the items of a dictionary-encoded mini-block page:
// variable-width items as offsets into data, fixed-width ones as width
// bytes each.
type dictionary21 struct {
	offs  []uint64
	data  []byte
	width int
}

// newDictionary21 decodes page buffer 2, the dictionary of a mini-block
// page, as pl.Dictionary describes it. Variable-width items are a block of
// u32 (or u64) offset width, u32 (u64) start of the bytes, n+1 offsets,
// the bytes; an older layout starts with a one-byte width and the count.
func newDictionary21(pl *lancepb.PageLayout, bufs [][]byte, dt arrow.DataType) (*dictionary21, error) {
	c, n := pl.Dictionary, pl.NumDictionaryItems
	if len(bufs) < 3 {
		return nil, fmt.Errorf("dictionary page without its dictionary buffer: %w", ErrCorrupt)
	}
	buf := bufs[2]
	if n > uint64(len(buf)) {
		return nil, fmt.Errorf("dictionary of %d bytes cannot hold %d items: %w", len(buf), n, ErrCorrupt)
	}
	if c.Kind == lancepb.CompFlat && !c.Compressed && !isBinary(dt) && int(c.BitsPerValue) == bitsPerValue(dt) && c.BitsPerValue%8 == 0 {
		w := int(c.BitsPerValue / 8)
		if uint64(len(buf)) < n*uint64(w) {
			return nil, fmt.Errorf("dictionary of %d bytes for %d items: %w", len(buf), n, ErrCorrupt)
		}
		return &dictionary21{data: buf, width: w, offs: make([]uint64, n)}, nil
	}
	if c.Kind != lancepb.CompVariable || c.Compressed || !isBinary(dt) {
		return nil, fmt.Errorf("dictionary encoded as %s for %s: %w", describe21(c), dt, ErrUnsupported)
	}
	if len(buf) < 16 {
		return nil, fmt.Errorf("dictionary of %d bytes: %w", len(buf), ErrCorrupt)
	}
	var width, start, at int
	switch {
	case buf[1] != 0 || buf[2] != 0 || buf[3] != 0: // older layout
		width = int(buf[0]) / 8
		if width == 4 {
			start, at = int(binary.LittleEndian.Uint32(buf[5:])), 9
		} else {
			start, at = int(binary.LittleEndian.Uint64(buf[9:])), 17
		}
	default:
		width = int(binary.LittleEndian.Uint32(buf)) / 8
		if width == 4 {
			start, at = int(binary.LittleEndian.Uint32(buf[4:])), 8
		} else {
			start, at = int(binary.LittleEndian.Uint64(buf[8:])), 16
		}
	}
	if (width != 4 && width != 8) || start < at || start > len(buf) || uint64(start-at) < (n+1)*uint64(width) {
		return nil, fmt.Errorf("dictionary of %d items with %d-byte offsets ending at %d of %d bytes: %w", n, width, start, len(buf), ErrCorrupt)
	}
	d := &dictionary21{data: buf[start:], offs: make([]uint64, n+1)}
	for i := range d.offs {
		d.offs[i] = getWord(buf[at:], width, i) - getWord(buf[at:], width, 0)
		if d.offs[i] > uint64(len(d.data)) || (i > 0 && d.offs[i] < d.offs[i-1]) {
			return nil, fmt.Errorf("dictionary offset %d out of order or beyond %d bytes: %w", d.offs[i], len(d.data), ErrCorrupt)
		}
	}
	return d, nil
}

// take appends the items that count indices of width bytes name; rows
// that are not valid get a null whatever their index.
func (d *dictionary21) take(b *builder21, indices []byte, width, count int, valid func(int) bool) error {
	if len(indices) < count*width {
		return fmt.Errorf("%d bytes for %d dictionary indices: %w", len(indices), count, ErrCorrupt)
	}
	items := uint64(len(d.offs))
	if d.width == 0 {
		items--
	}
	zero := make([]byte, d.width)
	for i := range count {
		k := getWord(indices, width, i)
		switch {
		case !valid(i) && d.width == 0:
			b.variable(nil)
		case !valid(i):
			if err := b.fixed(zero, 1); err != nil {
				return err
			}
		case k >= items:
			return fmt.Errorf("dictionary index %d of %d items: %w", k, items, ErrCorrupt)
		case d.width == 0:
			b.variable(d.data[d.offs[k]:d.offs[k+1]])
		default:
			if err := b.fixed(d.data[k*uint64(d.width):], 1); err != nil {
				return err
			}
		}
	}
	return nil
}
