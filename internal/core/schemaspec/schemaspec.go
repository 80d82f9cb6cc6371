// Package schemaspec reads and writes the table schemas operators hand to
// `walctl table create`: a JSON list of fields, or an Arrow IPC file or
// stream whose schema is taken. Types are written the way operators say
// them: "int64", "utf8", "timestamp[us, UTC]", "fixed_size_list<float32>[768]".
package schemaspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
)

// Field is one field of a JSON schema file.
type Field struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Parse reads a schema: an Arrow IPC stream or file (its schema is used) or a
// JSON array of fields (unknown JSON keys are refused). The schema must then
// pass arrowcheck.Schema (names, types, widths, time zones). Errors wrap
// errs.ErrInvalid and name the offending field.
func Parse(data []byte) (*arrow.Schema, error) {
	s, err := parse(data)
	if err != nil {
		return nil, err
	}
	if err := arrowcheck.Schema(s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return s, nil
}

func parse(data []byte) (*arrow.Schema, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && (trimmed[0] == '[' || trimmed[0] == '{') {
		return parseJSON(trimmed)
	}
	r, err := arrowcheck.NewStreamReader(data) // also an IPC file's embedded stream
	if err != nil {
		return nil, fmt.Errorf("schema: neither a JSON field list nor an Arrow IPC stream: %v: %w", err, errs.ErrInvalid)
	}
	defer r.Release()
	return r.Schema(), nil
}

func parseJSON(data []byte) (*arrow.Schema, error) {
	var fields []Field
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if data[0] == '{' {
		var wrapper struct {
			Fields []Field `json:"fields"`
		}
		if err := dec.Decode(&wrapper); err != nil {
			return nil, fmt.Errorf("schema JSON: %v: %w", err, errs.ErrInvalid)
		}
		fields = wrapper.Fields
	} else if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("schema JSON: %v: %w", err, errs.ErrInvalid)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("schema JSON: trailing data after the field list: %w", errs.ErrInvalid)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("schema JSON: no fields: %w", errs.ErrInvalid)
	}
	seen := map[string]bool{}
	out := make([]arrow.Field, 0, len(fields))
	for i, f := range fields {
		if f.Name == "" {
			return nil, fmt.Errorf("schema JSON: field %d has no name: %w", i, errs.ErrInvalid)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("schema JSON: field %q appears twice: %w", f.Name, errs.ErrInvalid)
		}
		seen[f.Name] = true
		t, err := ParseType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("schema JSON: field %q: %w", f.Name, err)
		}
		out = append(out, arrow.Field{Name: f.Name, Type: t, Nullable: f.Nullable})
	}
	return arrow.NewSchema(out, nil), nil
}

var (
	simpleTypes = map[string]arrow.DataType{
		"bool": arrow.FixedWidthTypes.Boolean, "boolean": arrow.FixedWidthTypes.Boolean,
		"int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
		"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64,
		"uint8": arrow.PrimitiveTypes.Uint8, "uint16": arrow.PrimitiveTypes.Uint16,
		"uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
		"float16": arrow.FixedWidthTypes.Float16, "float32": arrow.PrimitiveTypes.Float32,
		"float64": arrow.PrimitiveTypes.Float64, "float": arrow.PrimitiveTypes.Float32,
		"double": arrow.PrimitiveTypes.Float64,
		"utf8":   arrow.BinaryTypes.String, "string": arrow.BinaryTypes.String,
		"large_utf8": arrow.BinaryTypes.LargeString, "large_string": arrow.BinaryTypes.LargeString,
		"binary": arrow.BinaryTypes.Binary, "large_binary": arrow.BinaryTypes.LargeBinary,
		"date32": arrow.FixedWidthTypes.Date32,
	}
	timestampRe = regexp.MustCompile(`^timestamp\[(s|ms|us|ns)(?:,\s*([^\]]+))?\]$`)
	fsbRe       = regexp.MustCompile(`^fixed_size_binary\[(\d+)\]$`)
	fslRe       = regexp.MustCompile(`^fixed_size_list<(\w+)>\[(\d+)\]$`)
	units       = map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}
)

// ParseType parses one type name. The accepted names are those FormatType
// writes.
func ParseType(s string) (arrow.DataType, error) {
	s = strings.TrimSpace(s)
	if t, ok := simpleTypes[s]; ok {
		return t, nil
	}
	if m := timestampRe.FindStringSubmatch(s); m != nil {
		tz := strings.TrimSpace(m[2])
		if err := arrowcheck.TimeZone(tz); err != nil {
			return nil, fmt.Errorf("type %q: %w", s, err)
		}
		return &arrow.TimestampType{Unit: units[m[1]], TimeZone: tz}, nil
	}
	if m := fsbRe.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n <= 0 || n > arrowcheck.MaxFixedSizeBinaryWidth {
			return nil, fmt.Errorf("type %q: width must be 1..%d: %w", s, arrowcheck.MaxFixedSizeBinaryWidth, errs.ErrInvalid)
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: n}, nil
	}
	if m := fslRe.FindStringSubmatch(s); m != nil {
		item, ok := simpleTypes[m[1]]
		if !ok {
			return nil, fmt.Errorf("type %q: unknown item type %q: %w", s, m[1], errs.ErrInvalid)
		}
		// Atoi before the int32 conversion: 99999999999 must not wrap.
		n, err := strconv.Atoi(m[2])
		if err != nil || n <= 0 || n > arrowcheck.MaxFixedSizeListLen {
			return nil, fmt.Errorf("type %q: want fixed_size_list<ITEM>[N] with N in 1..%d: %w", s, arrowcheck.MaxFixedSizeListLen, errs.ErrInvalid)
		}
		return arrow.FixedSizeListOf(int32(n), item), nil
	}
	return nil, fmt.Errorf("unknown type %q (want e.g. int64, utf8, binary, timestamp[us, UTC], fixed_size_list<float32>[768]): %w", s, errs.ErrInvalid)
}

// FormatType writes a type the way ParseType reads it.
func FormatType(t arrow.DataType) string {
	switch tt := t.(type) {
	case *arrow.TimestampType:
		if tt.TimeZone != "" {
			return fmt.Sprintf("timestamp[%s, %s]", tt.Unit, tt.TimeZone)
		}
		return fmt.Sprintf("timestamp[%s]", tt.Unit)
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary[%d]", tt.ByteWidth)
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list<%s>[%d]", FormatType(tt.Elem()), tt.Len())
	case *arrow.BooleanType:
		return "bool"
	}
	return t.String()
}

// Fields describes a schema as a JSON field list.
func Fields(s *arrow.Schema) []Field {
	out := make([]Field, 0, s.NumFields())
	for _, f := range s.Fields() {
		out = append(out, Field{Name: f.Name, Type: FormatType(f.Type), Nullable: f.Nullable})
	}
	return out
}
