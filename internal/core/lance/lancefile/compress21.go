package lancefile

import (
	"encoding/binary"
	"fmt"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// Decoders of the compressive encodings the official 2.1 writer picks by
// default (lance-encoding's compression.rs): bit-packing in the FastLanes
// layout, RLE and FSST. Every length is checked before it is used: a
// damaged page is ErrCorrupt, never a panic.

// fastLanesValues is the number of values FastLanes packs together.
const fastLanesValues = 1024

// flOrder is FastLanes' transposition of the eight row groups of a lane.
var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// getWord and putWord read and write word i of width bytes (1, 2, 4, 8).
func getWord(b []byte, width, i int) uint64 {
	switch width {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

func putWord(b []byte, width, i int, v uint64) {
	switch width {
	case 1:
		b[i] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

// unpackFastLanes unpacks 1024 values of t bits packed at w bits each
// (1024*w/8 bytes in packed) into out (1024*t/8 bytes). Lane l of the
// 1024/t lanes holds rows 0..t-1, row r's bits start at r*w in the lane's
// words packed[lanes*k+l], and row r of lane l is value
// flOrder[r/8]*16 + (r%8)*128 + l.
func unpackFastLanes(t, w int, packed, out []byte) {
	width := t / 8
	lanes := fastLanesValues / t
	mask := uint64(1)<<w - 1
	if w == 64 {
		mask = ^uint64(0)
	}
	for lane := range lanes {
		for row := range t {
			var v uint64
			if w > 0 {
				bit := row * w
				word, shift := bit/t, bit%t
				v = getWord(packed, width, lanes*word+lane) >> shift
				if shift+w > t {
					v |= getWord(packed, width, lanes*(word+1)+lane) << (t - shift)
				}
				v &= mask
			}
			putWord(out, width, flOrder[row/8]*16+(row%8)*128+lane, v)
		}
	}
}

// inlineBitpacked decodes n values of t bits stored as chunks of 1024:
// a t-bit word giving the packed width w, then 1024*w/8 bytes.
func inlineBitpacked(buf []byte, t, n int) ([]byte, error) {
	width := t / 8
	out := make([]byte, ((n+fastLanesValues-1)/fastLanesValues)*fastLanesValues*width)
	for at := 0; at < n; at += fastLanesValues {
		if len(buf) < width {
			return nil, fmt.Errorf("bit-packed chunk header missing: %w", ErrCorrupt)
		}
		w := getWord(buf, width, 0)
		size := fastLanesValues * int(w) / 8
		if w > uint64(t) || len(buf) < width+size {
			return nil, fmt.Errorf("bit-packed chunk of %d bits in %d bytes: %w", w, len(buf), ErrCorrupt)
		}
		unpackFastLanes(t, int(w), buf[width:width+size], out[at*width:])
		buf = buf[width+size:]
	}
	return out[:n*width], nil
}

// outOfLineBitpacked decodes n values of t bits packed at w bits in whole
// chunks of 1024; a last partial chunk is either packed like the others
// or stored raw, which its size tells.
func outOfLineBitpacked(buf []byte, t, w, n int) ([]byte, error) {
	width := t / 8
	if w > t {
		return nil, fmt.Errorf("values packed at %d bits wider than %d: %w", w, t, ErrCorrupt)
	}
	chunk := fastLanesValues * w / 8
	whole, tail := n/fastLanesValues, n%fastLanesValues
	rawTail := tail > 0 && len(buf) == whole*chunk+tail*width
	if len(buf) < whole*chunk || (tail > 0 && !rawTail && len(buf) < (whole+1)*chunk) {
		return nil, fmt.Errorf("%d bytes for %d values packed at %d bits: %w", len(buf), n, w, ErrCorrupt)
	}
	out := make([]byte, (whole+1)*fastLanesValues*width)
	for c := range whole {
		unpackFastLanes(t, w, buf[c*chunk:], out[c*fastLanesValues*width:])
	}
	if rawTail {
		copy(out[whole*fastLanesValues*width:], buf[whole*chunk:])
	} else if tail > 0 {
		unpackFastLanes(t, w, buf[whole*chunk:], out[whole*fastLanesValues*width:])
	}
	return out[:n*width], nil
}

// runLengthDecoded expands RLE runs: values of width bytes each and one
// u8 length per run, into n values.
func runLengthDecoded(values, lengths []byte, width, n int) ([]byte, error) {
	if len(values) != len(lengths)*width {
		return nil, fmt.Errorf("rle: %d value bytes for %d runs: %w", len(values), len(lengths), ErrCorrupt)
	}
	out := make([]byte, 0, n*width)
	for r, l := range lengths {
		for range min(int(l), n-len(out)/width) {
			out = append(out, values[r*width:(r+1)*width]...)
		}
	}
	if len(out) != n*width {
		return nil, fmt.Errorf("rle runs hold %d values, want %d: %w", len(out)/width, n, ErrCorrupt)
	}
	return out, nil
}

// byteStreamJoined undoes a chunk's byte stream split: byte j of value i
// is at j*n+i.
func byteStreamJoined(buf []byte, width, n int) ([]byte, error) {
	if len(buf) < width*n {
		return nil, fmt.Errorf("byte stream split of %d bytes for %d values of %d: %w", len(buf), n, width, ErrCorrupt)
	}
	out := make([]byte, width*n)
	for j := range width {
		for i, b := range buf[j*n : (j+1)*n] {
			out[i*width+j] = b
		}
	}
	return out, nil
}

// fsstTable is a parsed FSST symbol table (fsst crate's export, in a
// buffer of fixed size: a u64 header with the symbol count and the encoder
// switch, the n symbols as u64, then their n lengths as bytes).
type fsstTable struct {
	on      bool
	symbols [][]byte
}

// fsstTableSize is the fixed size of a serialized symbol table.
const fsstTableSize = 8 + 256*8 + 256

func parseFsstTable(b []byte) (*fsstTable, error) {
	if len(b) != fsstTableSize || binary.LittleEndian.Uint32(b[4:]) != 0x46535354 {
		return nil, fmt.Errorf("fsst symbol table of %d bytes without its magic: %w", len(b), ErrCorrupt)
	}
	info := binary.LittleEndian.Uint64(b)
	t := &fsstTable{on: info&(1<<24) != 0}
	n := int(info & 255)
	for i := range n {
		l := int(b[8+8*n+i])
		if l < 1 || l > 8 {
			return nil, fmt.Errorf("fsst symbol %d of %d bytes: %w", i, l, ErrCorrupt)
		}
		t.symbols = append(t.symbols, b[8+8*i:8+8*i+l])
	}
	return t, nil
}

// decode appends the decompressed form of one value to dst.
func (t *fsstTable) decode(dst, src []byte) ([]byte, error) {
	if !t.on {
		return append(dst, src...), nil
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == 255:
			if i+1 >= len(src) {
				return nil, fmt.Errorf("fsst escape at the end of a value: %w", ErrCorrupt)
			}
			i++
			dst = append(dst, src[i])
		case int(c) < len(t.symbols):
			dst = append(dst, t.symbols[c]...)
		default:
			return nil, fmt.Errorf("fsst code %d of %d symbols: %w", c, len(t.symbols), ErrCorrupt)
		}
	}
	return dst, nil
}

// levels16 decodes n 16-bit repetition or definition levels of one
// mini-block chunk: flat, inline or out-of-line bit-packed.
func levels16(c *lancepb.Compressive, buf []byte, n int) ([]byte, error) {
	switch {
	case c.Kind == lancepb.CompFlat && c.BitsPerValue == 16 && !c.Compressed:
		if len(buf) < 2*n {
			return nil, fmt.Errorf("%d bytes for %d levels: %w", len(buf), n, ErrCorrupt)
		}
		return buf[:2*n], nil
	case c.Kind == lancepb.CompInlineBits && c.UncompressedBits == 16 && !c.Compressed:
		return inlineBitpacked(buf, 16, n)
	case c.Kind == lancepb.CompOutOfLineBits && c.UncompressedBits == 16 && c.Unsupported() == "":
		return outOfLineBitpacked(buf, 16, int(c.BitsPerValue), n)
	}
	return nil, fmt.Errorf("levels encoded as %s: %w", describe21(c), ErrUnsupported)
}
