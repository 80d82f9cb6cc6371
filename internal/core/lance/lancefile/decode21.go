package lancefile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// decodePage21 turns one file-format-2.1 page into an Arrow array. It
// decodes the layouts walctl writes (mini-block, full-zip and all-null
// pages of a flat column) and the official writer's default compression of
// mini-block pages (bit-packing, RLE, FSST, dictionaries); repetition
// levels, general compression and blob pages fail with ErrUnsupported
// naming what was found, which the caller completes with file and column.
func decodePage21(body []byte, bufs [][]byte, n int, dt arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	pl, err := lancepb.DecodePageLayout(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(pl.Layers) > 1 {
		return nil, fmt.Errorf("page with %d repetition/definition layers (nested data): %w", len(pl.Layers), ErrUnsupported)
	}
	switch pl.Kind {
	case lancepb.LayoutAllNull:
		if pl.HasConstant {
			return nil, fmt.Errorf("constant layout with a value or levels: %w", ErrUnsupported)
		}
		return array.MakeArrayOfNull(mem, dt, n), nil
	case lancepb.LayoutMiniBlock:
		return decodeMiniBlock(pl, bufs, n, dt)
	case lancepb.LayoutFullZip:
		return decodeFullZip(pl, bufs, n, dt)
	case lancepb.LayoutBlob:
		return nil, fmt.Errorf("blob layout: %w", ErrUnsupported)
	}
	return nil, fmt.Errorf("page layout %d: %w", pl.Kind, ErrUnsupported)
}

// checkValues21 verifies that a value encoding is one walctl decodes and
// matches dt; it returns the bits of one value (0 for variable width) or,
// for variable width, the offset bits as a negative number.
func checkValues21(c *lancepb.Compressive, dt arrow.DataType) (int, error) {
	if what := c.Unsupported(); what != "" {
		return 0, fmt.Errorf("%s: %w", what, ErrUnsupported)
	}
	if isBinary(dt) {
		if c.Kind != lancepb.CompVariable || (c.Offsets.BitsPerValue != 32 && c.Offsets.BitsPerValue != 64) {
			return 0, fmt.Errorf("%s column encoded as kind %d: %w", dt, c.Kind, ErrUnsupported)
		}
		return -int(c.Offsets.BitsPerValue), nil
	}
	want := uint64(bitsPerValue(dt))
	got := c.BitsPerValue
	if c.Kind == lancepb.CompFixedSizeList {
		got = c.Values.BitsPerValue * c.ItemsPerValue
	} else if c.Kind != lancepb.CompFlat {
		return 0, fmt.Errorf("%s column encoded as kind %d: %w", dt, c.Kind, ErrUnsupported)
	}
	if got != want {
		return 0, fmt.Errorf("values of %d bits do not match %s: %w", got, dt, ErrUnsupported)
	}
	return int(want), nil
}

// builder21 collects the rows of one page.
type builder21 struct {
	dt       arrow.DataType
	bits     int // bits per fixed-width value; 0 for variable width
	n, row   int
	validity []byte
	nulls    int
	values   []byte  // fixed width, bit-packed for booleans
	items    []byte  // validity of a fixed_size_list's items, if they have one
	offs     []int64 // variable width: n+1 offsets into data
	data     []byte
}

func newBuilder21(dt arrow.DataType, bits, n int) *builder21 {
	b := &builder21{dt: dt, bits: bits, n: n, validity: make([]byte, (n+7)/8)}
	if bits > 0 {
		b.values = make([]byte, (n*bits+7)/8)
	} else {
		b.offs = make([]int64, 1, n+1)
	}
	return b
}

func (b *builder21) setValid(i int, valid bool) {
	if valid {
		bitutil.SetBit(b.validity, b.row+i)
	} else {
		b.nulls++
	}
}

// fixed appends count values from src (bit-packed from bit 0 for booleans).
func (b *builder21) fixed(src []byte, count int) error {
	need := (count*b.bits + 7) / 8
	if len(src) < need || b.row+count > b.n {
		return fmt.Errorf("%d value bytes for %d values of %s: %w", len(src), count, b.dt, ErrCorrupt)
	}
	if b.bits%8 == 0 {
		copy(b.values[b.row*b.bits/8:], src[:need])
	} else {
		bitutil.CopyBitmap(src, 0, count, b.values, b.row)
	}
	b.row += count
	return nil
}

// itemValidity records the validity bits of the items of the count
// fixed_size_list values that the next call to fixed appends.
func (b *builder21) itemValidity(src []byte, count int) error {
	dim := int(b.dt.(*arrow.FixedSizeListType).Len())
	if len(src) < (count*dim+7)/8 {
		return fmt.Errorf("item validity of %d bytes for %d values: %w", len(src), count*dim, ErrCorrupt)
	}
	if b.items == nil {
		b.items = make([]byte, (b.n*dim+7)/8)
	}
	bitutil.CopyBitmap(src, 0, count*dim, b.items, b.row*dim)
	return nil
}

// variable appends one value (nil for a null).
func (b *builder21) variable(v []byte) {
	b.data = append(b.data, v...)
	b.offs = append(b.offs, int64(len(b.data)))
	b.row++
}

func (b *builder21) finish() (arrow.Array, error) {
	if b.row != b.n {
		return nil, fmt.Errorf("page holds %d values, its header says %d rows: %w", b.row, b.n, ErrCorrupt)
	}
	if b.bits > 0 {
		arr := fixedArray(b.dt, b.n, b.validity, b.nulls, b.values)
		if b.items == nil {
			return arr, nil
		}
		defer arr.Release()
		return withItemValidity(arr, b.items), nil
	}
	return binaryArray(b.dt, b.offs, b.data, b.validity, b.nulls)
}

// decodeFullZip decodes buffer 0: per row an optional control word (the
// definition level) and the value, fixed width or length-prefixed.
func decodeFullZip(pl *lancepb.PageLayout, bufs [][]byte, n int, dt arrow.DataType) (arrow.Array, error) {
	switch {
	case pl.BitsRep != 0:
		return nil, fmt.Errorf("full-zip page with repetition levels: %w", ErrUnsupported)
	case pl.BitsDef > 8:
		return nil, fmt.Errorf("full-zip page with %d-bit definition levels: %w", pl.BitsDef, ErrUnsupported)
	case pl.Value == nil || len(bufs) < 1 || pl.NumItems != uint64(n):
		return nil, fmt.Errorf("full-zip page of %d items for %d rows: %w", pl.NumItems, n, ErrCorrupt)
	}
	value, scheme := pl.Value, ""
	if value.Kind == lancepb.CompGeneral && value.Unsupported() == "" {
		// Each variable-width value is compressed on its own.
		value, scheme = value.Inner, value.Scheme
	}
	bits, err := checkValues21(value, dt)
	if err != nil {
		return nil, err
	}
	ctrl := btoi(pl.BitsDef > 0)
	if bits > 0 && scheme == "" {
		return decodeFullZipFixed(pl, bufs[0], n, dt, bits, ctrl)
	} else if bits > 0 {
		return nil, fmt.Errorf("full-zip fixed-width values with %s compression: %w", scheme, ErrUnsupported)
	}
	z := fullZipVariable{width: -bits / 8, ctrl: ctrl, scheme: scheme}
	return z.decode(pl, bufs, n, dt)
}

// decodeFullZipFixed reads n fixed-width values of bits bits, each
// preceded by ctrl control bytes (0 or 1: the definition level) and, for
// a fixed_size_list whose items have a validity, by its item bits.
func decodeFullZipFixed(pl *lancepb.PageLayout, buf []byte, n int, dt arrow.DataType, bits, ctrl int) (arrow.Array, error) {
	width, items := bits/8, 0
	if v := pl.Value; v.Kind == lancepb.CompFixedSizeList && v.HasValidity {
		items = (int(v.ItemsPerValue) + 7) / 8
	}
	if bits%8 != 0 || uint64(bits+8*items) != pl.BitsPerValue {
		return nil, fmt.Errorf("full-zip values of %d bits for %s: %w", pl.BitsPerValue, dt, ErrUnsupported)
	}
	stride := ctrl + items + width
	if len(buf) < n*stride {
		return nil, fmt.Errorf("full-zip buffer of %d bytes for %d values of %d: %w", len(buf), n, stride, ErrCorrupt)
	}
	if ctrl+items == 0 {
		return fixedArray(dt, n, nil, 0, buf[:n*width]), nil
	}
	b := newBuilder21(dt, bits, n)
	for i := range n {
		row := buf[i*stride : (i+1)*stride]
		b.setValid(0, ctrl == 0 || row[0] == 0)
		if items > 0 {
			if err := b.itemValidity(row[ctrl:ctrl+items], 1); err != nil {
				return nil, err
			}
		}
		if err := b.fixed(row[ctrl+items:], 1); err != nil {
			return nil, err
		}
	}
	return b.finish()
}

// rowIndex is a full-zip repetition index: n+1 byte positions, one per
// row start and one for the end, each of width bytes.
type rowIndex struct {
	index []byte
	width int
}

func newRowIndex(bufs [][]byte, n int) (rowIndex, error) {
	var index []byte
	if len(bufs) > 1 {
		index = bufs[1]
	}
	iw := len(index) / (n + 1)
	if len(index) != iw*(n+1) || (iw != 1 && iw != 2 && iw != 4 && iw != 8) {
		return rowIndex{}, fmt.Errorf("full-zip repetition index of %d bytes for %d rows: %w", len(index), n, ErrCorrupt)
	}
	return rowIndex{index: index, width: iw}, nil
}

func (r rowIndex) at(i int) uint64 { return getWord(r.index, r.width, i) }

// decode reads n variable-width values, each preceded by
// ctrl control bytes and a length of width bytes, and checks every row
// start against the repetition index.
func (z fullZipVariable) decode(pl *lancepb.PageLayout, bufs [][]byte, n int, dt arrow.DataType) (arrow.Array, error) {
	width := z.width
	buf := bufs[0]
	if n > len(buf) {
		return nil, fmt.Errorf("full-zip buffer of %d bytes for %d values: %w", len(buf), n, ErrCorrupt)
	}
	if uint64(8*width) != pl.BitsPerOffset {
		return nil, fmt.Errorf("full-zip lengths of %d bits, encoding says %d: %w", pl.BitsPerOffset, 8*width, ErrUnsupported)
	}
	rows, err := newRowIndex(bufs, n)
	if err != nil {
		return nil, err
	}
	size := len(buf)
	b := newBuilder21(dt, 0, n)
	for i := range n {
		if rows.at(i) != uint64(size-len(buf)) {
			return nil, fmt.Errorf("full-zip repetition index puts row %d at byte %d, it is at %d: %w", i, rows.at(i), size-len(buf), ErrCorrupt)
		}
		if buf, err = z.value(b, buf); err != nil {
			return nil, fmt.Errorf("full-zip row %d of %d: %w", i, n, err)
		}
	}
	if rows.at(n) != uint64(size-len(buf)) {
		return nil, fmt.Errorf("full-zip repetition index ends at byte %d, values at %d: %w", rows.at(n), size-len(buf), ErrCorrupt)
	}
	return b.finish()
}

// fullZipVariable reads the values of a variable-width full-zip page:
// ctrl (0 or 1) control bytes, a length of width bytes and the bytes of
// each value, which general compression may have compressed.
type fullZipVariable struct {
	width, ctrl int
	scheme      string
}

// value appends the value at the head of buf to b and returns the rest
// of buf.
func (z fullZipVariable) value(b *builder21, buf []byte) ([]byte, error) {
	width := z.width
	valid := true
	if z.ctrl > 0 {
		if len(buf) < 1 {
			return nil, fmt.Errorf("buffer ends: %w", ErrCorrupt)
		}
		valid, buf = buf[0] == 0, buf[1:]
	}
	b.setValid(0, valid)
	if !valid {
		b.variable(nil)
		return buf, nil
	}
	if len(buf) < width {
		return nil, fmt.Errorf("buffer ends: %w", ErrCorrupt)
	}
	l := getWord(buf, width, 0)
	buf = buf[width:]
	if l > uint64(len(buf)) {
		return nil, fmt.Errorf("value of %d bytes overruns the page: %w", l, ErrCorrupt)
	}
	v := buf[:l]
	if z.scheme != "" {
		var err error
		if v, err = generalDecompress(z.scheme, v); err != nil {
			return nil, err
		}
	}
	b.variable(v)
	return buf[l:], nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func describe21(c *lancepb.Compressive) string {
	if what := c.Unsupported(); what != "" {
		return what
	}
	return fmt.Sprintf("kind %d of %d bits", c.Kind, c.BitsPerValue)
}
