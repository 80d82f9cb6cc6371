package lancepb

import "fmt"

// ArrayEncoding kinds (field numbers of lance.encodings.ArrayEncoding's oneof).
const (
	EncFlat          = 1
	EncNullable      = 2
	EncFixedSizeList = 3
	EncBinary        = 6
	EncDictionary    = 7
)

// Nullability kinds of lance.encodings.Nullable.
const (
	NoNulls   = 1
	SomeNulls = 2
	AllNulls  = 3
)

// ArrayEncoding is the subset of lance.encodings.ArrayEncoding (file format
// 2.0) that walctl writes and reads: flat, nullable, fixed_size_list and
// binary, and the dictionary the official writer gives low-cardinality
// strings. Any other kind decodes with Kind set and Unsupported naming it.
type ArrayEncoding struct {
	Kind int
	// Flat.
	BitsPerValue uint64
	BufferIndex  uint32
	BufferType   uint32 // 0 page, 1 column, 2 file
	Compression  string // non-empty when the flat buffer is compressed
	// Nullable.
	Nullability int
	Validity    *ArrayEncoding
	Values      *ArrayEncoding
	// FixedSizeList.
	Dimension   uint32
	HasValidity bool
	Items       *ArrayEncoding
	// Binary; Indices and Items also serve a dictionary.
	Indices        *ArrayEncoding
	Bytes          *ArrayEncoding
	NullAdjustment uint64
	// Dictionary: index 0 is a null row, index k item k-1.
	NumDictionaryItems uint64
}

// Flat20 returns a flat encoding of bits per value stored in page buffer idx.
func Flat20(bits uint64, idx uint32) *ArrayEncoding {
	return &ArrayEncoding{Kind: EncFlat, BitsPerValue: bits, BufferIndex: idx}
}

// Encode returns the wire form of a.
func (a *ArrayEncoding) Encode() []byte {
	var e Enc
	switch a.Kind {
	case EncFlat:
		e.Message(EncFlat, func(s *Enc) {
			s.Uint(1, a.BitsPerValue)
			s.Message(2, func(b *Enc) {
				b.Uint(1, uint64(a.BufferIndex))
				b.Uint(2, uint64(a.BufferType))
			})
		})
	case EncNullable:
		e.Message(EncNullable, func(s *Enc) {
			s.Message(protoNum(a.Nullability), func(n *Enc) {
				switch a.Nullability {
				case NoNulls:
					n.OptBytes(1, a.Values.Encode())
				case SomeNulls:
					n.OptBytes(1, a.Validity.Encode())
					n.OptBytes(2, a.Values.Encode())
				}
			})
		})
	case EncFixedSizeList:
		e.Message(EncFixedSizeList, func(s *Enc) {
			s.Uint(1, uint64(a.Dimension))
			s.OptBytes(2, a.Items.Encode())
			s.Bool(3, a.HasValidity)
		})
	case EncBinary:
		e.Message(EncBinary, func(s *Enc) {
			s.OptBytes(1, a.Indices.Encode())
			s.OptBytes(2, a.Bytes.Encode())
			s.Uint(3, a.NullAdjustment)
		})
	}
	return e.B
}

var encNames20 = map[int]string{
	4: "list", 5: "struct", 7: "dictionary", 8: "fsst", 9: "packed_struct",
	10: "bitpacked", 11: "fixed_size_binary", 12: "bitpacked_for_non_neg",
	13: "constant", 14: "inline_bitpacking", 15: "out_of_line_bitpacking",
	16: "variable", 17: "packed_struct_fixed_width_mini_block", 18: "block",
	19: "rle", 20: "general_mini_block", 21: "byte_stream_split",
}

// Unsupported returns a description of the first part of the encoding tree
// walctl cannot decode, or "" when it can decode all of it.
func (a *ArrayEncoding) Unsupported() string {
	if a == nil {
		return "missing encoding"
	}
	switch a.Kind {
	case EncFlat:
		if a.Compression != "" && a.Compression != "zstd" && a.Compression != "lz4" {
			return "compressed flat buffer (" + a.Compression + ")"
		}
		if a.BufferType != 0 {
			return "flat buffer outside the page"
		}
		return ""
	case EncNullable:
		if a.Nullability == AllNulls {
			return ""
		}
		if s := a.Values.Unsupported(); s != "" {
			return s
		}
		if a.Nullability == SomeNulls {
			return a.Validity.Unsupported()
		}
		return ""
	case EncFixedSizeList:
		return a.Items.Unsupported()
	case EncDictionary:
		if s := a.Indices.Unsupported(); s != "" {
			return s
		}
		return a.Items.Unsupported()
	case EncBinary:
		if s := a.Indices.Unsupported(); s != "" {
			return s
		}
		return a.Bytes.Unsupported()
	}
	if n, ok := encNames20[a.Kind]; ok {
		return n + " encoding"
	}
	return fmt.Sprintf("array encoding %d", a.Kind)
}

// DecodeArrayEncoding parses a lance.encodings.ArrayEncoding.
func DecodeArrayEncoding(b []byte) (*ArrayEncoding, error) {
	a := &ArrayEncoding{}
	sub := func(dst **ArrayEncoding, raw []byte) error {
		v, err := DecodeArrayEncoding(raw)
		*dst = v
		return err
	}
	err := Walk(b, func(x WireField) error {
		a.Kind = int(x.Num)
		switch x.Num {
		case EncFlat:
			return Walk(x.B, func(y WireField) error {
				switch y.Num {
				case 1:
					a.BitsPerValue = y.U
				case 2:
					return Walk(y.B, func(z WireField) error {
						switch z.Num {
						case 1:
							a.BufferIndex = uint32(z.U)
						case 2:
							a.BufferType = uint32(z.U)
						}
						return nil
					})
				case 3:
					a.Compression = "compressed"
					return Walk(y.B, func(z WireField) error {
						if z.Num == 1 && len(z.B) > 0 {
							a.Compression = string(z.B)
						}
						return nil
					})
				}
				return nil
			})
		case EncNullable:
			return Walk(x.B, func(y WireField) error {
				a.Nullability = int(y.Num)
				return Walk(y.B, func(z WireField) error {
					switch {
					case y.Num == NoNulls && z.Num == 1, y.Num == SomeNulls && z.Num == 2:
						return sub(&a.Values, z.B)
					case y.Num == SomeNulls && z.Num == 1:
						return sub(&a.Validity, z.B)
					}
					return nil
				})
			})
		case EncFixedSizeList:
			return Walk(x.B, func(y WireField) error {
				switch y.Num {
				case 1:
					a.Dimension = uint32(y.U)
				case 2:
					return sub(&a.Items, y.B)
				case 3:
					a.HasValidity = y.U != 0
				}
				return nil
			})
		case EncBinary, EncDictionary:
			return a.decodeStrings(int(x.Num), x.B)
		}
		return nil
	})
	return a, err
}

// decodeStrings parses a binary encoding or a dictionary (of strings).
func (a *ArrayEncoding) decodeStrings(kind int, b []byte) error {
	sub := func(dst **ArrayEncoding, raw []byte) error {
		v, err := DecodeArrayEncoding(raw)
		*dst = v
		return err
	}
	switch kind {
	case EncBinary:
		return Walk(b, func(y WireField) error {
			switch y.Num {
			case 1:
				return sub(&a.Indices, y.B)
			case 2:
				return sub(&a.Bytes, y.B)
			case 3:
				a.NullAdjustment = y.U
			}
			return nil
		})
	case EncDictionary:
		return Walk(b, func(y WireField) error {
			switch y.Num {
			case 1:
				return sub(&a.Indices, y.B)
			case 2:
				return sub(&a.Items, y.B)
			case 3:
				a.NumDictionaryItems = y.U
			}
			return nil
		})
	}
	return nil
}
