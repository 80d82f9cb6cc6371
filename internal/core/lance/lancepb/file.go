package lancepb

import "fmt"

// Type URLs of the google.protobuf.Any messages inside Lance v2 files.
const (
	TypeURLArrayEncoding  = "/lance.encodings.ArrayEncoding"
	TypeURLColumnEncoding = "/lance.encodings.ColumnEncoding"
	TypeURLPageLayout21   = "/lance.encodings21.PageLayout"
)

// EncodeAny wraps value in a google.protobuf.Any.
func EncodeAny(typeURL string, value []byte) []byte {
	var e Enc
	e.String(1, typeURL)
	e.Bytes(2, value)
	return e.B
}

// DecodeAny unwraps a google.protobuf.Any.
func DecodeAny(b []byte) (typeURL string, value []byte, err error) {
	err = Walk(b, func(x WireField) error {
		switch x.Num {
		case 1:
			typeURL = string(x.B)
		case 2:
			value = x.B
		}
		return nil
	})
	return typeURL, value, err
}

// ValuesColumnEncoding is the Any-wrapped lance.encodings.ColumnEncoding
// {values: Empty} that every plain column carries.
var ValuesColumnEncoding = EncodeAny(TypeURLColumnEncoding, []byte{0x0a, 0x00})

// FileDescriptor is lance.file.FileDescriptor (global buffer 0 of a v2 file).
type FileDescriptor struct {
	Fields []Field
	Length uint64
}

// Encode returns the wire form of d.
func (d *FileDescriptor) Encode() []byte {
	var e Enc
	e.Message(1, func(s *Enc) {
		for i := range d.Fields {
			s.OptBytes(1, d.Fields[i].Encode())
		}
	})
	e.Uint(2, d.Length)
	return e.B
}

// DecodeFileDescriptor parses a lance.file.FileDescriptor.
func DecodeFileDescriptor(b []byte) (*FileDescriptor, error) {
	d := &FileDescriptor{}
	err := Walk(b, func(x WireField) error {
		switch x.Num {
		case 1:
			return Walk(x.B, func(y WireField) error {
				if y.Num != 1 {
					return nil
				}
				f, err := DecodeField(y.B)
				d.Fields = append(d.Fields, f)
				return err
			})
		case 2:
			d.Length = x.U
		}
		return nil
	})
	return d, err
}

// Page is lance.file.v2.ColumnMetadata.Page. Encoding holds the Any bytes of
// the page's encoding (direct encodings only).
type Page struct {
	BufferOffsets []uint64
	BufferSizes   []uint64
	Length        uint64
	Encoding      []byte
	Priority      uint64
}

// ColumnMetadata is lance.file.v2.ColumnMetadata.
type ColumnMetadata struct {
	Encoding      []byte
	Pages         []Page
	BufferOffsets []uint64
	BufferSizes   []uint64
}

func encodeDirect(e *Enc, num int, anyBytes []byte) {
	e.Message(protoNum(num), func(s *Enc) {
		s.Message(2, func(d *Enc) { d.OptBytes(1, anyBytes) })
	})
}

// Encode returns the wire form of c.
func (c *ColumnMetadata) Encode() []byte {
	var e Enc
	encodeDirect(&e, 1, c.Encoding)
	for i := range c.Pages {
		p := &c.Pages[i]
		e.Message(2, func(s *Enc) {
			s.PackedUint(1, p.BufferOffsets)
			s.PackedUint(2, p.BufferSizes)
			s.Uint(3, p.Length)
			encodeDirect(s, 4, p.Encoding)
			s.Uint(5, p.Priority)
		})
	}
	e.PackedUint(3, c.BufferOffsets)
	e.PackedUint(4, c.BufferSizes)
	return e.B
}

func decodeEncoding(b []byte) ([]byte, error) {
	var out []byte
	found := false
	err := Walk(b, func(x WireField) error {
		switch x.Num {
		case 1:
			return fmt.Errorf("%w: indirect (deferred) encodings are not supported", ErrMalformed)
		case 2:
			found = true
			return Walk(x.B, func(y WireField) error {
				if y.Num == 1 {
					out = y.B
				}
				return nil
			})
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: encoding has no direct bytes", ErrMalformed)
	}
	return out, err
}

// DecodeColumnMetadata parses a lance.file.v2.ColumnMetadata.
func DecodeColumnMetadata(b []byte) (*ColumnMetadata, error) {
	c := &ColumnMetadata{}
	err := Walk(b, func(x WireField) error {
		var err error
		switch x.Num {
		case 1:
			c.Encoding, err = decodeEncoding(x.B)
		case 2:
			var p Page
			err = Walk(x.B, func(y WireField) error {
				var err error
				switch y.Num {
				case 1:
					p.BufferOffsets, err = y.Uints(p.BufferOffsets)
				case 2:
					p.BufferSizes, err = y.Uints(p.BufferSizes)
				case 3:
					p.Length = y.U
				case 4:
					p.Encoding, err = decodeEncoding(y.B)
				case 5:
					p.Priority = y.U
				}
				return err
			})
			c.Pages = append(c.Pages, p)
		case 3:
			c.BufferOffsets, err = x.Uints(c.BufferOffsets)
		case 4:
			c.BufferSizes, err = x.Uints(c.BufferSizes)
		}
		return err
	})
	return c, err
}
