package arrowcheck

import (
	"encoding/binary"
	"fmt"
)

// Limits on what one Arrow IPC message's metadata may describe. walctl's
// tables are flat; these only stop hostile metadata early.
const (
	maxSchemaFields = 10_000 // fields of a schema, nested ones included
	maxFieldDepth   = 32
)

// VerifyMetadata checks the flatbuffer metadata of one Arrow IPC message
// before arrow-go reads it: every table, vector and string it reaches lies
// inside meta, and a schema has at most 10,000 fields nested at most 32
// deep. arrow-go sizes slices from vector lengths it has not checked (a
// schema whose field count says 2^30 made FuzzBatch's process run out of
// memory), which a recover cannot catch. Errors wrap ErrMalformed.
func VerifyMetadata(meta []byte) error {
	v := &verifier{b: meta}
	if err := v.message(); err != nil {
		return fmt.Errorf("Arrow IPC message metadata: %v: %w", err, ErrMalformed)
	}
	return nil
}

type verifier struct {
	b      []byte
	fields int
}

// fbTable is a flatbuffer table: its position and its vtable's.
type fbTable struct {
	pos, vt, vtLen, size int
}

var le = binary.LittleEndian

func (v *verifier) u32(p int) (int, error) {
	if p < 0 || p+4 > len(v.b) {
		return 0, fmt.Errorf("offset %d outside %d bytes", p, len(v.b))
	}
	return int(le.Uint32(v.b[p:])), nil
}

func (v *verifier) table(pos int) (fbTable, error) {
	if pos < 0 || pos+4 > len(v.b) {
		return fbTable{}, fmt.Errorf("table at %d outside %d bytes", pos, len(v.b))
	}
	vt := pos - int(int32(le.Uint32(v.b[pos:])))
	if vt < 0 || vt+4 > len(v.b) {
		return fbTable{}, fmt.Errorf("vtable of table at %d outside the metadata", pos)
	}
	t := fbTable{pos: pos, vt: vt, vtLen: int(le.Uint16(v.b[vt:])), size: int(le.Uint16(v.b[vt+2:]))}
	if t.vtLen < 4 || t.vtLen%2 != 0 || vt+t.vtLen > len(v.b) || pos+t.size > len(v.b) {
		return fbTable{}, fmt.Errorf("table at %d has a malformed vtable", pos)
	}
	return t, nil
}

// field returns the position of field i of t (0: absent), checking that
// its n bytes lie inside the table.
func (v *verifier) field(t fbTable, i, n int) (int, error) {
	if 4+2*i+2 > t.vtLen {
		return 0, nil
	}
	off := int(le.Uint16(v.b[t.vt+4+2*i:]))
	if off == 0 {
		return 0, nil
	}
	if off+n > t.size {
		return 0, fmt.Errorf("field %d of table at %d runs past the table", i, t.pos)
	}
	return t.pos + off, nil
}

// ref follows the offset in field i of t (0: absent).
func (v *verifier) ref(t fbTable, i int) (int, error) {
	p, err := v.field(t, i, 4)
	if err != nil || p == 0 {
		return 0, err
	}
	off, err := v.u32(p)
	if err != nil {
		return 0, err
	}
	return p + off, nil
}

// sub returns the table field i of t refers to (ok false: absent).
func (v *verifier) sub(t fbTable, i int) (fbTable, bool, error) {
	p, err := v.ref(t, i)
	if err != nil || p == 0 {
		return fbTable{}, false, err
	}
	s, err := v.table(p)
	return s, err == nil, err
}

// vector checks the vector (or string, elem 1) of field i and returns the
// position of its first element and its length.
func (v *verifier) vector(t fbTable, i, elem int) (int, int, error) {
	p, err := v.ref(t, i)
	if err != nil || p == 0 {
		return 0, 0, err
	}
	n, err := v.u32(p)
	if err != nil {
		return 0, 0, err
	}
	if n > (len(v.b)-p-4)/elem {
		return 0, 0, fmt.Errorf("vector of %d elements at %d runs past the %d bytes of metadata", n, p, len(v.b))
	}
	return p + 4, n, nil
}

// tables checks each table of the vector of tables in field i with check.
func (v *verifier) tables(t fbTable, i int, check func(fbTable) error) error {
	start, n, err := v.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := 0; k < n; k++ {
		off, _ := v.u32(start + 4*k)
		s, err := v.table(start + 4*k + off)
		if err != nil {
			return err
		}
		if err := check(s); err != nil {
			return err
		}
	}
	return nil
}

// Message: 1 header_type, 2 header, 4 custom_metadata.
func (v *verifier) message() error {
	root, err := v.u32(0)
	if err != nil {
		return err
	}
	m, err := v.table(root)
	if err != nil {
		return err
	}
	if err := v.tables(m, 4, v.keyValue); err != nil {
		return err
	}
	tp, err := v.field(m, 1, 1)
	if err != nil || tp == 0 {
		return err
	}
	h, ok, err := v.sub(m, 2)
	if err != nil || !ok {
		return err
	}
	switch v.b[tp] {
	case 1: // Schema
		return v.schema(h)
	case 2: // DictionaryBatch: 1 data
		rb, ok, err := v.sub(h, 1)
		if err != nil || !ok {
			return err
		}
		return v.recordBatch(rb)
	case 3:
		return v.recordBatch(h)
	}
	return nil // tensors: arrow-go's reader refuses them
}

// KeyValue: 0 key, 1 value.
func (v *verifier) keyValue(t fbTable) error {
	for i := 0; i < 2; i++ {
		if _, _, err := v.vector(t, i, 1); err != nil {
			return err
		}
	}
	return nil
}

// Schema: 1 fields, 2 custom_metadata, 3 features.
func (v *verifier) schema(s fbTable) error {
	if err := v.tables(s, 1, func(f fbTable) error { return v.field1(f, 1) }); err != nil {
		return err
	}
	if err := v.tables(s, 2, v.keyValue); err != nil {
		return err
	}
	_, _, err := v.vector(s, 3, 8)
	return err
}

// field1 checks a Field: 0 name, 2 type_type, 3 type, 4 dictionary,
// 5 children, 6 custom_metadata.
func (v *verifier) field1(f fbTable, depth int) error {
	if v.fields++; v.fields > maxSchemaFields {
		return fmt.Errorf("schema has more than %d fields", maxSchemaFields)
	}
	if depth > maxFieldDepth {
		return fmt.Errorf("fields nested more than %d deep", maxFieldDepth)
	}
	if _, _, err := v.vector(f, 0, 1); err != nil {
		return err
	}
	if tp, err := v.field(f, 2, 1); err != nil {
		return err
	} else if tp != 0 && v.b[tp] == 14 { // Union: 1 typeIds
		if u, ok, err := v.sub(f, 3); err != nil {
			return err
		} else if ok {
			if _, _, err := v.vector(u, 1, 4); err != nil {
				return err
			}
		}
	} else if _, _, err := v.sub(f, 3); err != nil {
		return err
	}
	if d, ok, err := v.sub(f, 4); err != nil {
		return err
	} else if ok {
		if _, _, err := v.sub(d, 1); err != nil { // indexType
			return err
		}
	}
	if err := v.tables(f, 5, func(c fbTable) error { return v.field1(c, depth+1) }); err != nil {
		return err
	}
	return v.tables(f, 6, v.keyValue)
}

// RecordBatch: 1 nodes, 2 buffers (16-byte structs), 3 compression,
// 4 variadicBufferCounts. Each view column's variadic buffer count is one
// of the batch's buffers apiece: arrow-go sizes a slice by the count
// before reading any (a count of 2^40 made it allocate 8 TiB).
func (v *verifier) recordBatch(rb fbTable) error {
	for _, f := range []struct{ i, elem int }{{1, 16}, {2, 16}, {4, 8}} {
		if _, _, err := v.vector(rb, f.i, f.elem); err != nil {
			return err
		}
	}
	_, nbuf, _ := v.vector(rb, 2, 16)
	start, n, _ := v.vector(rb, 4, 8)
	left := int64(nbuf)
	for k := 0; k < n; k++ {
		c := int64(le.Uint64(v.b[start+8*k:]))
		if c < 0 || c > left {
			return fmt.Errorf("variadic buffer count %d of view column %d: the batch has %d buffers, %d not yet claimed", c, k, nbuf, left)
		}
		left -= c
	}
	_, _, err := v.sub(rb, 3)
	return err
}
