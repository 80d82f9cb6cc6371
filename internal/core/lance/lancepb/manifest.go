package lancepb

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field is lance.file.Field: one node of a Lance schema.
type Field struct {
	Name        string
	ID          int32
	ParentID    int32
	LogicalType string
	Nullable    bool
	// Encoding is the legacy per-field encoding hint (1 plain, 2 var-binary);
	// the official writer still sets it, so walctl does too.
	Encoding int32
	Metadata map[string][]byte
	raw      []byte
}

// Encode returns the wire form of f (its original bytes if it was decoded).
func (f *Field) Encode() []byte {
	if f.raw != nil {
		return f.raw
	}
	var e Enc
	e.String(2, f.Name)
	e.Int32(3, f.ID)
	e.Int32(4, f.ParentID)
	e.String(5, f.LogicalType)
	e.Bool(6, f.Nullable)
	e.Int32(7, f.Encoding)
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.Message(10, func(s *Enc) {
			s.OptBytes(1, []byte(k))
			s.OptBytes(2, f.Metadata[k])
		})
	}
	return e.B
}

// DecodeField parses a lance.file.Field.
func DecodeField(b []byte) (Field, error) {
	f := Field{raw: b}
	err := Walk(b, func(x WireField) error {
		switch x.Num {
		case 2:
			f.Name = string(x.B)
		case 3:
			f.ID = x.Int32()
		case 4:
			f.ParentID = x.Int32()
		case 5:
			f.LogicalType = string(x.B)
		case 6:
			f.Nullable = x.U != 0
		case 7:
			f.Encoding = x.Int32()
		case 10:
			k, v, err := x.MapEntry()
			if err != nil {
				return err
			}
			if f.Metadata == nil {
				f.Metadata = map[string][]byte{}
			}
			f.Metadata[k] = v
		}
		return nil
	})
	return f, err
}

// DataFile is lance.table.DataFile: one file of a fragment.
type DataFile struct {
	Path          string
	Fields        []int32
	ColumnIndices []int32
	Major, Minor  uint32
	SizeBytes     uint64
	// HasBaseID is set when the file lives under another base path (shallow
	// clones); walctl cannot resolve those.
	HasBaseID bool
}

func (d *DataFile) encode(e *Enc) {
	e.String(1, d.Path)
	e.PackedInt32(2, d.Fields)
	e.PackedInt32(3, d.ColumnIndices)
	e.Uint(4, uint64(d.Major))
	e.Uint(5, uint64(d.Minor))
	e.Uint(6, d.SizeBytes)
}

func decodeDataFile(b []byte) (DataFile, error) {
	var d DataFile
	err := Walk(b, func(x WireField) error {
		var err error
		switch x.Num {
		case 1:
			d.Path = string(x.B)
		case 2:
			d.Fields, err = x.Int32s(d.Fields)
		case 3:
			d.ColumnIndices, err = x.Int32s(d.ColumnIndices)
		case 4:
			d.Major = uint32(x.U)
		case 5:
			d.Minor = uint32(x.U)
		case 6:
			d.SizeBytes = x.U
		case 7:
			d.HasBaseID = true
		}
		return err
	})
	return d, err
}

// Fragment is lance.table.DataFragment.
type Fragment struct {
	ID           uint64
	Files        []DataFile
	PhysicalRows uint64
	// DeletedRows is the deletion file's row count; HasDeletionFile tells
	// whether the fragment has one at all.
	HasDeletionFile bool
	DeletedRows     uint64
	// Deletion names the deletion file: its type (0 an Arrow array of row
	// offsets, 1 a roaring bitmap), read version and id.
	Deletion DeletionFile
	// HasRowIDs is set when the fragment carries a stable row-id sequence.
	HasRowIDs bool
	raw       []byte
}

// DeletionFile is lance.table.DeletionFile (the fields walctl reads).
type DeletionFile struct {
	Type        uint64
	ReadVersion uint64
	ID          uint64
}

// Encode returns the wire form of the fragment; a decoded fragment keeps its
// original bytes (deletion file, row ids and all) unless its ID was changed.
func (f *Fragment) Encode() []byte {
	if f.raw != nil {
		return f.raw
	}
	var e Enc
	e.Uint(1, f.ID)
	for i := range f.Files {
		e.Message(2, f.Files[i].encode)
	}
	e.Uint(4, f.PhysicalRows)
	return e.B
}

// DecodeFragment parses a lance.table.DataFragment.
func DecodeFragment(b []byte) (Fragment, error) {
	f := Fragment{raw: b}
	err := Walk(b, func(x WireField) error {
		switch x.Num {
		case 1:
			f.ID = x.U
		case 2:
			d, err := decodeDataFile(x.B)
			if err != nil {
				return err
			}
			f.Files = append(f.Files, d)
		case 3:
			f.HasDeletionFile = true
			return Walk(x.B, func(y WireField) error {
				switch y.Num {
				case 1:
					f.Deletion.Type = y.U
				case 2:
					f.Deletion.ReadVersion = y.U
				case 3:
					f.Deletion.ID = y.U
				case 4:
					f.DeletedRows = y.U
				}
				return nil
			})
		case 4:
			f.PhysicalRows = x.U
		case 5, 6:
			f.HasRowIDs = true
		}
		return nil
	})
	return f, err
}

// Manifest is lance.table.Manifest. Fields walctl does not model (schema
// metadata, base paths, table metadata, branch, ...) are kept in order as raw
// bytes and written back unchanged by Encode.
type Manifest struct {
	Fields             []Field
	Fragments          []Fragment
	Version            uint64
	WriterLibrary      string
	WriterVersion      string
	IndexSection       *uint64
	TimestampSeconds   int64
	TimestampNanos     int32
	ReaderFeatureFlags uint64
	WriterFeatureFlags uint64
	MaxFragmentID      *uint32
	TransactionFile    string
	TransactionSection *uint64
	NextRowID          uint64
	FileFormat         string
	FormatVersion      string
	Config             map[string]string
	// Other holds the raw bytes of every field not listed above.
	Other [][]byte
}

// Encode returns the wire form of m.
func (m *Manifest) Encode() []byte {
	var e Enc
	for i := range m.Fields {
		e.OptBytes(1, m.Fields[i].Encode())
	}
	for i := range m.Fragments {
		e.OptBytes(2, m.Fragments[i].Encode())
	}
	e.Uint(3, m.Version)
	if m.IndexSection != nil {
		e.OptUint(6, *m.IndexSection)
	}
	if m.TimestampSeconds != 0 || m.TimestampNanos != 0 {
		e.Message(7, func(s *Enc) {
			s.Uint(1, uint64(m.TimestampSeconds))
			s.Int32(2, m.TimestampNanos)
		})
	}
	e.Uint(9, m.ReaderFeatureFlags)
	e.Uint(10, m.WriterFeatureFlags)
	if m.MaxFragmentID != nil {
		e.OptUint(11, uint64(*m.MaxFragmentID))
	}
	e.String(12, m.TransactionFile)
	if m.WriterLibrary != "" || m.WriterVersion != "" {
		e.Message(13, func(s *Enc) {
			s.String(1, m.WriterLibrary)
			s.String(2, m.WriterVersion)
		})
	}
	e.Uint(14, m.NextRowID)
	if m.FileFormat != "" || m.FormatVersion != "" {
		e.Message(15, func(s *Enc) {
			s.String(1, m.FileFormat)
			s.String(2, m.FormatVersion)
		})
	}
	keys := make([]string, 0, len(m.Config))
	for k := range m.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.StringMap(16, m.Config, keys)
	if m.TransactionSection != nil {
		e.OptUint(21, *m.TransactionSection)
	}
	for _, raw := range m.Other {
		e.Raw(raw)
	}
	return e.B
}

// DecodeManifest parses a lance.table.Manifest.
func DecodeManifest(b []byte) (*Manifest, error) {
	m := &Manifest{Config: map[string]string{}}
	err := Walk(b, func(x WireField) error {
		if manifestMessages[x.Num] {
			if x.Type != protowire.BytesType {
				return fmt.Errorf("%w: manifest field %d has wire type %d", ErrMalformed, x.Num, x.Type)
			}
			return m.decodeMessage(x)
		}
		m.decodeScalar(x)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// manifestMessages are the manifest's fields that hold a message (or a
// map entry) and must be length-delimited.
var manifestMessages = map[protowire.Number]bool{1: true, 2: true, 7: true, 13: true, 15: true, 16: true}

// decodeMessage decodes one of manifestMessages into m.
func (m *Manifest) decodeMessage(x WireField) error {
	switch x.Num {
	case 1:
		f, err := DecodeField(x.B)
		if err != nil {
			return err
		}
		m.Fields = append(m.Fields, f)
	case 2:
		f, err := DecodeFragment(x.B)
		if err != nil {
			return err
		}
		m.Fragments = append(m.Fragments, f)
	case 7:
		return Walk(x.B, func(y WireField) error {
			switch y.Num {
			case 1:
				m.TimestampSeconds = int64(y.U)
			case 2:
				m.TimestampNanos = y.Int32()
			}
			return nil
		})
	case 13:
		return stringPair(x.B, &m.WriterLibrary, &m.WriterVersion)
	case 15:
		return stringPair(x.B, &m.FileFormat, &m.FormatVersion)
	case 16:
		k, v, err := x.MapEntry()
		if err != nil {
			return err
		}
		m.Config[k] = string(v)
	}
	return nil
}

// stringPair decodes a message whose fields 1 and 2 are strings (the
// writer version: library and version; the data format: name and version).
func stringPair(b []byte, one, two *string) error {
	return Walk(b, func(y WireField) error {
		switch y.Num {
		case 1:
			*one = string(y.B)
		case 2:
			*two = string(y.B)
		}
		return nil
	})
}

// decodeScalar decodes a field that is not one of manifestMessages into
// m; fields walctl does not know are kept as they are.
func (m *Manifest) decodeScalar(x WireField) {
	switch x.Num {
	case 3:
		m.Version = x.U
	case 6:
		v := x.U
		m.IndexSection = &v
	case 8:
		// tag: belongs to the version that carried it, never inherited
	case 9:
		m.ReaderFeatureFlags = x.U
	case 10:
		m.WriterFeatureFlags = x.U
	case 11:
		v := uint32(x.U)
		m.MaxFragmentID = &v
	case 12:
		m.TransactionFile = string(x.B)
	case 14:
		m.NextRowID = x.U
	case 21:
		v := x.U
		m.TransactionSection = &v
	default:
		m.Other = append(m.Other, x.Raw)
	}
}
