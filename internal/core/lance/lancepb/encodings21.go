package lancepb

import "fmt"

// RepDefLayer is lance.encodings21.RepDefLayer: the meaning of one
// repetition/definition layer of a page.
type RepDefLayer uint64

// The layers walctl writes: flat columns have exactly one item layer.
const (
	LayerAllValidItem RepDefLayer = 1
	LayerNullableItem RepDefLayer = 3
)

// Page layouts (field numbers of lance.encodings21.PageLayout's oneof).
const (
	LayoutMiniBlock = 1
	LayoutAllNull   = 2 // ConstantLayout in file format 2.2 and later
	LayoutFullZip   = 3
	LayoutBlob      = 4
)

// Compressive encodings (field numbers of lance.encodings21.CompressiveEncoding's
// oneof) that walctl writes and reads.
const (
	CompFlat          = 1
	CompVariable      = 2
	CompOutOfLineBits = 4
	CompInlineBits    = 5
	CompFsst          = 6
	CompRle           = 8
	CompByteSplit     = 9
	CompGeneral       = 10
	CompFixedSizeList = 11
)

var compNames21 = map[int]string{
	3: "constant", 4: "out_of_line_bitpacking", 5: "inline_bitpacking", 6: "fsst",
	7: "dictionary", 8: "rle", 9: "byte_stream_split", 10: "general",
	12: "packed_struct", 13: "variable_packed_struct",
}

// Compressive is the subset of lance.encodings21.CompressiveEncoding walctl
// writes (flat, variable with flat offsets, fixed_size_list) and reads (also
// the official writer's defaults: inline and out-of-line bit-packing, RLE
// and FSST). Any other kind decodes with Kind set and Unsupported naming it.
type Compressive struct {
	Kind int
	// Flat; for out-of-line bit-packing, the packed width.
	BitsPerValue uint64
	// UncompressedBits is the value width of bit-packed data.
	UncompressedBits uint64
	// Inner holds the packed values (out-of-line bit-packing), the run
	// values (RLE), the compressed strings (FSST), the split values (byte
	// stream split) or what general compression compressed.
	Inner *Compressive
	// RunLengths are RLE's run lengths.
	RunLengths *Compressive
	// SymbolTable is FSST's serialized symbol table.
	SymbolTable []byte
	// Scheme names the general compression ("lz4", "zstd") of Inner's
	// first buffer.
	Scheme string
	// Compressed is set when a flat buffer or variable values carry a
	// BufferCompression (lz4, zstd).
	Compressed bool
	// Variable.
	Offsets *Compressive
	// FixedSizeList.
	ItemsPerValue uint64
	HasValidity   bool
	Values        *Compressive
}

// Flat21 returns an uncompressed flat encoding of bits per value.
func Flat21(bits uint64) *Compressive { return &Compressive{Kind: CompFlat, BitsPerValue: bits} }

// Encode returns the wire form of c.
func (c *Compressive) Encode() []byte {
	var e Enc
	switch c.Kind {
	case CompFlat:
		e.Message(CompFlat, func(s *Enc) { s.Uint(1, c.BitsPerValue) })
	case CompVariable:
		e.Message(CompVariable, func(s *Enc) { s.OptBytes(1, c.Offsets.Encode()) })
	case CompFixedSizeList:
		e.Message(CompFixedSizeList, func(s *Enc) {
			s.Uint(1, c.ItemsPerValue)
			s.OptBytes(2, c.Values.Encode())
			s.Bool(3, c.HasValidity)
		})
	}
	return e.B
}

// Unsupported describes the first part of c walctl cannot decode, or "".
func (c *Compressive) Unsupported() string {
	if c == nil {
		return "missing compressive encoding"
	}
	switch c.Kind {
	case CompFlat:
		if c.Compressed {
			return "flat buffer with general compression"
		}
		return ""
	case CompVariable:
		if c.Compressed {
			return "variable values with general compression"
		}
		if c.Offsets == nil || c.Offsets.Kind != CompFlat || c.Offsets.Compressed {
			return "variable encoding with compressed offsets"
		}
		return ""
	case CompFixedSizeList:
		if c.Values == nil || c.Values.Kind != CompFlat {
			return "nested fixed_size_list"
		}
		return c.Values.Unsupported()
	case CompInlineBits:
		if c.Compressed {
			return "inline bit-packing with general compression"
		}
		return ""
	case CompOutOfLineBits:
		if c.Inner == nil || c.Inner.Kind != CompFlat || c.Inner.Compressed {
			return "out-of-line bit-packing of values other than flat"
		}
		return ""
	case CompRle:
		if c.Inner == nil || c.Inner.Kind != CompFlat || c.RunLengths == nil || c.RunLengths.Kind != CompFlat || c.RunLengths.BitsPerValue != 8 {
			return "rle with values or run lengths other than flat"
		}
		return c.Inner.Unsupported()
	case CompFsst:
		if c.Inner == nil || c.Inner.Kind != CompVariable {
			return "fsst of values other than variable"
		}
		return c.Inner.Unsupported()
	case CompByteSplit:
		if c.Inner == nil || c.Inner.Kind != CompFlat {
			return "byte_stream_split of values other than flat"
		}
		return c.Inner.Unsupported()
	case CompGeneral:
		if c.Scheme != "lz4" && c.Scheme != "zstd" {
			return "general compression " + c.Scheme
		}
		if c.Inner == nil || c.Inner.Kind == CompGeneral {
			return "general compression of nothing or of itself"
		}
		return c.Inner.Unsupported()
	}
	if n, ok := compNames21[c.Kind]; ok {
		return n + " compression"
	}
	return fmt.Sprintf("compressive encoding %d", c.Kind)
}

// DecodeCompressive parses a lance.encodings21.CompressiveEncoding.
func DecodeCompressive(b []byte) (*Compressive, error) {
	c := &Compressive{}
	err := Walk(b, func(x WireField) error {
		c.Kind = int(x.Num)
		switch x.Num {
		case CompFlat:
			return Walk(x.B, func(y WireField) error {
				switch y.Num {
				case 1:
					c.BitsPerValue = y.U
				case 2:
					c.Compressed = true
				}
				return nil
			})
		case CompVariable:
			return Walk(x.B, func(y WireField) error {
				var err error
				switch y.Num {
				case 1:
					c.Offsets, err = DecodeCompressive(y.B)
				case 2:
					c.Compressed = true
				}
				return err
			})
		case CompInlineBits, CompOutOfLineBits, CompRle, CompFsst, CompByteSplit, CompGeneral:
			return c.decodeCompressed(int(x.Num), x.B)
		case CompFixedSizeList:
			return Walk(x.B, func(y WireField) error {
				var err error
				switch y.Num {
				case 1:
					c.ItemsPerValue = y.U
				case 2:
					c.Values, err = DecodeCompressive(y.B)
				case 3:
					c.HasValidity = y.U != 0
				}
				return err
			})
		}
		return nil
	})
	return c, err
}

// decodeCompressed parses the encodings of the official writer's
// compression: bit-packing, RLE, FSST, byte stream split and general.
func (c *Compressive) decodeCompressed(kind int, b []byte) error {
	switch kind {
	case CompInlineBits, CompOutOfLineBits:
		return Walk(b, func(y WireField) error {
			var err error
			switch {
			case y.Num == 1:
				c.UncompressedBits = y.U
			case y.Num == 2 && kind == CompInlineBits:
				c.Compressed = true
			case y.Num == 3 && kind == CompOutOfLineBits:
				c.Inner, err = DecodeCompressive(y.B)
				if err == nil {
					c.BitsPerValue = c.Inner.BitsPerValue
				}
			}
			return err
		})
	case CompRle, CompFsst, CompByteSplit:
		return Walk(b, func(y WireField) error {
			var err error
			switch {
			case kind != CompFsst && y.Num == 1, kind == CompFsst && y.Num == 2:
				c.Inner, err = DecodeCompressive(y.B)
			case kind == CompRle && y.Num == 2:
				c.RunLengths, err = DecodeCompressive(y.B)
			case kind == CompFsst && y.Num == 1:
				c.SymbolTable = y.B
			}
			return err
		})
	case CompGeneral:
		return Walk(b, func(y WireField) error {
			var err error
			switch y.Num {
			case 1:
				c.Scheme, err = decodeScheme(y.B)
			case 3:
				c.Inner, err = DecodeCompressive(y.B)
			}
			return err
		})
	}
	return nil
}

// decodeScheme returns the name of a lance.encodings21.BufferCompression's
// scheme.
func decodeScheme(b []byte) (string, error) {
	scheme := "unspecified"
	err := Walk(b, func(y WireField) error {
		if y.Num == 1 {
			switch y.U {
			case 1:
				scheme = "lz4"
			case 2:
				scheme = "zstd"
			default:
				scheme = fmt.Sprintf("scheme %d", y.U)
			}
		}
		return nil
	})
	return scheme, err
}

// PageLayout is lance.encodings21.PageLayout with the fields of the layouts
// walctl writes (mini-block, all-null, full-zip). Kind is the oneof field.
type PageLayout struct {
	Kind   int
	Layers []RepDefLayer
	// Mini-block.
	Rep, Def, Value *Compressive
	// Dictionary is the encoding of a dictionary-encoded mini-block page's
	// items (page buffer 2); the values are then indices into it.
	Dictionary         *Compressive
	NumBuffers         uint64
	RepIndexDepth      uint64
	NumItems           uint64
	HasLargeChunk      bool
	NumDictionaryItems uint64
	// Full-zip (Value and NumItems are shared with mini-block).
	BitsRep, BitsDef uint64
	// BitsPerValue (fixed width) or BitsPerOffset (variable width), as the
	// oneof says.
	BitsPerValue, BitsPerOffset uint64
	NumVisibleItems             uint64
	// HasConstant is set when an all-null layout carries a 2.2 constant
	// value or its own repetition/definition buffers.
	HasConstant bool
}

func layerUints(ls []RepDefLayer) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		out[i] = uint64(l)
	}
	return out
}

// Encode returns the wire form of p.
func (p *PageLayout) Encode() []byte {
	var e Enc
	switch p.Kind {
	case LayoutMiniBlock:
		e.Message(LayoutMiniBlock, func(s *Enc) {
			if p.Rep != nil {
				s.OptBytes(1, p.Rep.Encode())
			}
			if p.Def != nil {
				s.OptBytes(2, p.Def.Encode())
			}
			s.OptBytes(3, p.Value.Encode())
			s.PackedUint(6, layerUints(p.Layers))
			s.Uint(7, p.NumBuffers)
			s.Uint(8, p.RepIndexDepth)
			s.Uint(9, p.NumItems)
		})
	case LayoutAllNull:
		e.Message(LayoutAllNull, func(s *Enc) { s.PackedUint(5, layerUints(p.Layers)) })
	case LayoutFullZip:
		e.Message(LayoutFullZip, func(s *Enc) {
			s.Uint(1, p.BitsRep)
			s.Uint(2, p.BitsDef)
			if p.BitsPerOffset != 0 {
				s.OptUint(4, p.BitsPerOffset)
			} else {
				s.OptUint(3, p.BitsPerValue)
			}
			s.Uint(5, p.NumItems)
			s.Uint(6, p.NumVisibleItems)
			s.OptBytes(7, p.Value.Encode())
			s.PackedUint(8, layerUints(p.Layers))
		})
	}
	return e.B
}

func decodeLayers(f WireField, dst []RepDefLayer) ([]RepDefLayer, error) {
	us, err := f.Uints(nil)
	for _, u := range us {
		dst = append(dst, RepDefLayer(u))
	}
	return dst, err
}

// DecodePageLayout parses a lance.encodings21.PageLayout. Layouts other than
// the three walctl writes decode with only Kind set.
func DecodePageLayout(b []byte) (*PageLayout, error) {
	p := &PageLayout{}
	err := Walk(b, func(x WireField) error {
		p.Kind = int(x.Num)
		switch x.Num {
		case LayoutMiniBlock:
			return Walk(x.B, func(y WireField) error {
				var err error
				switch y.Num {
				case 1:
					p.Rep, err = DecodeCompressive(y.B)
				case 2:
					p.Def, err = DecodeCompressive(y.B)
				case 3:
					p.Value, err = DecodeCompressive(y.B)
				case 4:
					p.Dictionary, err = DecodeCompressive(y.B)
				case 5:
					p.NumDictionaryItems = y.U
				case 6:
					p.Layers, err = decodeLayers(y, p.Layers)
				case 7:
					p.NumBuffers = y.U
				case 8:
					p.RepIndexDepth = y.U
				case 9:
					p.NumItems = y.U
				case 10:
					p.HasLargeChunk = y.U != 0
				}
				return err
			})
		case LayoutAllNull:
			return Walk(x.B, func(y WireField) error {
				var err error
				if y.Num == 5 {
					p.Layers, err = decodeLayers(y, p.Layers)
				} else if y.Num > 5 {
					p.HasConstant = true
				}
				return err
			})
		case LayoutFullZip:
			return Walk(x.B, func(y WireField) error {
				var err error
				switch y.Num {
				case 1:
					p.BitsRep = y.U
				case 2:
					p.BitsDef = y.U
				case 3:
					p.BitsPerValue = y.U
				case 4:
					p.BitsPerOffset = y.U
				case 5:
					p.NumItems = y.U
				case 6:
					p.NumVisibleItems = y.U
				case 7:
					p.Value, err = DecodeCompressive(y.B)
				case 8:
					p.Layers, err = decodeLayers(y, p.Layers)
				}
				return err
			})
		}
		return nil
	})
	return p, err
}
