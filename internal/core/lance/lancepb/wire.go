// Package lancepb encodes and decodes the protobuf messages of the Lance table
// and file formats (protos/table.proto, file.proto, file2.proto,
// transaction.proto, encodings_v2_0.proto and encodings_v2_1.proto in the Lance
// repository) by hand with protowire. Only the fields walctl needs are
// modelled; everything else a message carries is kept as raw wire bytes so
// that a manifest written by another Lance writer survives a rewrite by walctl
// field for field.
package lancepb

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed is returned (wrapped with the message and field) when bytes do
// not parse as the expected protobuf message.
var ErrMalformed = errors.New("malformed protobuf")

// Enc appends protobuf fields to a byte slice. Zero scalars are written only
// by the explicit "Opt" helpers, mirroring proto3 presence rules.
type Enc struct{ B []byte }

// Uint writes a varint field unless v is zero.
func (e *Enc) Uint(num protowire.Number, v uint64) {
	if v != 0 {
		e.OptUint(num, v)
	}
}

// OptUint writes a varint field even when v is zero (proto3 optional).
func (e *Enc) OptUint(num protowire.Number, v uint64) {
	e.B = protowire.AppendTag(e.B, num, protowire.VarintType)
	e.B = protowire.AppendVarint(e.B, v)
}

// Int32 writes an int32 field (negative values use ten varint bytes).
func (e *Enc) Int32(num protowire.Number, v int32) { e.Uint(num, uint64(int64(v))) }

// Bool writes a bool field unless false.
func (e *Enc) Bool(num protowire.Number, v bool) {
	if v {
		e.OptUint(num, 1)
	}
}

// Bytes writes a length-delimited field unless empty.
func (e *Enc) Bytes(num protowire.Number, v []byte) {
	if len(v) > 0 {
		e.OptBytes(num, v)
	}
}

// OptBytes writes a length-delimited field even when empty.
func (e *Enc) OptBytes(num protowire.Number, v []byte) {
	e.B = protowire.AppendTag(e.B, num, protowire.BytesType)
	e.B = protowire.AppendBytes(e.B, v)
}

// String writes a string field unless empty.
func (e *Enc) String(num protowire.Number, v string) {
	if v != "" {
		e.B = protowire.AppendTag(e.B, num, protowire.BytesType)
		e.B = protowire.AppendString(e.B, v)
	}
}

// Message writes a nested message built by fn (always present).
func (e *Enc) Message(num protowire.Number, fn func(*Enc)) {
	var sub Enc
	fn(&sub)
	e.OptBytes(num, sub.B)
}

// PackedUint writes a packed repeated varint field unless empty.
func (e *Enc) PackedUint(num protowire.Number, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, v)
	}
	e.OptBytes(num, p)
}

// PackedInt32 writes a packed repeated int32 field unless empty.
func (e *Enc) PackedInt32(num protowire.Number, vs []int32) {
	if len(vs) == 0 {
		return
	}
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, uint64(int64(v)))
	}
	e.OptBytes(num, p)
}

// StringMap writes a map<string,string> field, one entry per key, in the
// order of keys.
func (e *Enc) StringMap(num protowire.Number, m map[string]string, keys []string) {
	for _, k := range keys {
		e.Message(num, func(s *Enc) {
			s.OptBytes(1, []byte(k))
			s.OptBytes(2, []byte(m[k]))
		})
	}
}

// Raw appends already-encoded field bytes (tag included).
func (e *Enc) Raw(b []byte) { e.B = append(e.B, b...) }

// WireField is one decoded field of a message: its number, wire type, the scalar
// value for varint/fixed types, the payload for length-delimited ones, and the
// raw bytes of the whole field (tag included) for pass-through.
type WireField struct {
	Num  protowire.Number
	Type protowire.Type
	U    uint64
	B    []byte
	Raw  []byte
}

// Walk calls fn for each top-level field of msg in order.
func Walk(msg []byte, fn func(f WireField) error) error {
	for len(msg) > 0 {
		start := msg
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: bad tag: %v", ErrMalformed, protowire.ParseError(n))
		}
		msg = msg[n:]
		f := WireField{Num: num, Type: typ}
		switch typ {
		case protowire.VarintType:
			f.U, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(msg)
			f.U = uint64(v)
		case protowire.Fixed64Type:
			f.U, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			f.B, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
		}
		msg = msg[n:]
		f.Raw = start[:len(start)-len(msg)]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// Uints decodes a repeated varint field that may be packed or not.
func (f WireField) Uints(dst []uint64) ([]uint64, error) {
	if f.Type == protowire.VarintType {
		return append(dst, f.U), nil
	}
	if f.Type != protowire.BytesType {
		return dst, fmt.Errorf("%w: field %d: unexpected wire type %d", ErrMalformed, f.Num, f.Type)
	}
	b := f.B
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return dst, fmt.Errorf("%w: field %d: bad packed varint", ErrMalformed, f.Num)
		}
		dst = append(dst, v)
		b = b[n:]
	}
	return dst, nil
}

// Int32s decodes a repeated int32 field that may be packed or not.
func (f WireField) Int32s(dst []int32) ([]int32, error) {
	us, err := f.Uints(nil)
	for _, u := range us {
		dst = append(dst, int32(u))
	}
	return dst, err
}

// Int32 returns the field as an int32 (two's complement).
func (f WireField) Int32() int32 { return int32(f.U) }

// MapEntry decodes a map<string, X> entry, returning key and raw value bytes.
func (f WireField) MapEntry() (string, []byte, error) {
	var k string
	var v []byte
	err := Walk(f.B, func(e WireField) error {
		switch e.Num {
		case 1:
			k = string(e.B)
		case 2:
			v = e.B
		}
		return nil
	})
	return k, v, err
}

func protoNum(n int) protowire.Number { return protowire.Number(n) }
