// Package lancefile writes and reads Lance v2 data files (file format 2.0 and
// 2.1) for the flat Arrow schemas walctl supports. It writes without
// compression and reads what the official writer compresses too
// (bit-packing, RLE, FSST, dictionaries, byte stream split, zstd, lz4).
package lancefile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// ErrCorrupt marks a data file that is truncated, has a wrong footer or
// inconsistent metadata.
var ErrCorrupt = fmt.Errorf("corrupt data file: %w", errs.ErrCorrupt)

// ErrUnsupported marks something walctl cannot read or extend (nested
// data, blob pages, 2.2 layouts, deletion files, stable row ids ...).
var ErrUnsupported = fmt.Errorf("unsupported by walctl: %w", errs.ErrInvalid)

// ErrUnsupportedType is returned for an Arrow or Lance type walctl cannot
// write or read; the message names the field and the type.
var ErrUnsupportedType = fmt.Errorf("unsupported type: %w", errs.ErrInvalid)

// Schema is a flat table schema: one top-level Arrow field per Lance leaf
// field, which is also one column of every data file, in order.
type Schema struct {
	Arrow  *arrow.Schema
	Fields []lancepb.Field
}

// FieldIDs returns the Lance field ids in column order.
func (s *Schema) FieldIDs() []int32 {
	ids := make([]int32, len(s.Fields))
	for i := range s.Fields {
		ids[i] = s.Fields[i].ID
	}
	return ids
}

// FromArrow converts an Arrow schema to a Lance schema with field ids 0..n-1.
// Every field must have a supported type; the first that does not is named
// in an ErrUnsupportedType error.
func FromArrow(s *arrow.Schema) (*Schema, error) {
	if s == nil || s.NumFields() == 0 {
		return nil, fmt.Errorf("schema has no fields: %w", errs.ErrInvalid)
	}
	out := &Schema{Arrow: s}
	seen := map[string]bool{}
	for i, f := range s.Fields() {
		if f.Name == "" || seen[f.Name] {
			return nil, fmt.Errorf("field %d: empty or duplicate name %q: %w", i, f.Name, errs.ErrInvalid)
		}
		seen[f.Name] = true
		lt, err := LogicalType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		enc := int32(1) // plain
		switch f.Type.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
			enc = 2 // var-binary
		}
		out.Fields = append(out.Fields, lancepb.Field{
			Name: f.Name, ID: int32(i), ParentID: -1, LogicalType: lt,
			Nullable: f.Nullable, Encoding: enc,
		})
	}
	return out, nil
}

// FromLance converts the fields of a manifest or file to a flat Schema. A
// nested field or an unsupported logical type is refused with
// ErrUnsupportedType naming the field.
func FromLance(fields []lancepb.Field) (*Schema, error) {
	out := &Schema{}
	var afs []arrow.Field
	for _, f := range fields {
		if f.ParentID != -1 {
			return nil, fmt.Errorf("field %q (id %d) is nested: %w", f.Name, f.ID, ErrUnsupportedType)
		}
		dt, err := ArrowType(f.LogicalType)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		afs = append(afs, arrow.Field{Name: f.Name, Type: dt, Nullable: f.Nullable})
		out.Fields = append(out.Fields, f)
	}
	out.Arrow = arrow.NewSchema(afs, nil)
	return out, nil
}

var timeUnits = []string{"s", "ms", "us", "ns"}

// LogicalType returns Lance's logical type string for a supported Arrow type.
func LogicalType(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return "bool", nil
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type:
		return dt.Name(), nil
	case *arrow.Float16Type:
		return "halffloat", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.StringType:
		return "string", nil
	case *arrow.LargeStringType:
		return "large_string", nil
	case *arrow.BinaryType:
		return "binary", nil
	case *arrow.LargeBinaryType:
		return "large_binary", nil
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary:%d", t.ByteWidth), nil
	case *arrow.Date32Type:
		return "date32:day", nil
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return fmt.Sprintf("timestamp:%s:%s", timeUnits[t.Unit], tz), nil
	case *arrow.FixedSizeListType:
		var item string
		switch t.Elem().ID() {
		case arrow.FLOAT16:
			item = "halffloat"
		case arrow.FLOAT32:
			item = "float"
		case arrow.INT8:
			item = "int8"
		case arrow.UINT8:
			item = "uint8"
		default:
			return "", fmt.Errorf("%s (fixed_size_list items must be float16, float32, int8 or uint8): %w", dt, ErrUnsupportedType)
		}
		if t.Len() <= 0 {
			return "", fmt.Errorf("%s (dimension must be positive): %w", dt, ErrUnsupportedType)
		}
		return fmt.Sprintf("fixed_size_list:%s:%d", item, t.Len()), nil
	}
	return "", fmt.Errorf("%s: %w", dt, ErrUnsupportedType)
}

var simpleTypes = map[string]arrow.DataType{
	"bool": arrow.FixedWidthTypes.Boolean,
	"int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
	"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64,
	"uint8": arrow.PrimitiveTypes.Uint8, "uint16": arrow.PrimitiveTypes.Uint16,
	"uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
	"halffloat": arrow.FixedWidthTypes.Float16, "float": arrow.PrimitiveTypes.Float32,
	"double": arrow.PrimitiveTypes.Float64, "string": arrow.BinaryTypes.String,
	"large_string": arrow.BinaryTypes.LargeString, "binary": arrow.BinaryTypes.Binary,
	"large_binary": arrow.BinaryTypes.LargeBinary, "date32:day": arrow.FixedWidthTypes.Date32,
}

// ArrowType parses a Lance logical type string into an Arrow type.
func ArrowType(lt string) (arrow.DataType, error) {
	if dt, ok := simpleTypes[lt]; ok {
		return dt, nil
	}
	parts := strings.Split(lt, ":")
	bad := fmt.Errorf("logical type %q: %w", lt, ErrUnsupportedType)
	switch parts[0] {
	case "fixed_size_binary":
		if len(parts) == 2 {
			if n, err := strconv.Atoi(parts[1]); err == nil && n > 0 {
				return &arrow.FixedSizeBinaryType{ByteWidth: n}, nil
			}
		}
	case "timestamp":
		if len(parts) >= 3 {
			tz := strings.Join(parts[2:], ":")
			if tz == "-" {
				tz = ""
			}
			for u, name := range timeUnits {
				if name == parts[1] {
					return &arrow.TimestampType{Unit: arrow.TimeUnit(u), TimeZone: tz}, nil
				}
			}
		}
	case "fixed_size_list":
		if len(parts) == 3 {
			n, err := strconv.Atoi(parts[2])
			item, ok := simpleTypes[parts[1]]
			if err == nil && n > 0 && ok {
				switch item.ID() {
				case arrow.FLOAT16, arrow.FLOAT32, arrow.INT8, arrow.UINT8:
					return arrow.FixedSizeListOfField(int32(n), arrow.Field{Name: "item", Type: item, Nullable: true}), nil
				}
			}
		}
	}
	return nil, bad
}

// byteWidth returns the bits per value of a fixed-width type as stored in a
// Lance page (a fixed-size list counts its items), or 0 for variable width.
func bitsPerValue(dt arrow.DataType) int {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return 1
	case *arrow.FixedSizeListType:
		return bitsPerValue(t.Elem()) * int(t.Len())
	case arrow.FixedWidthDataType:
		return t.BitWidth()
	}
	return 0
}
