package arrowcheck

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// varBinary checks utf8, large_utf8, binary and large_binary: offsets in
// range and monotonic, and UTF-8 for the string types. Every slot is
// checked, null or not: readers (arrow-rs, hence Lance) validate the whole
// value range of a utf8 array.
func (c checker) varBinary(d arrow.ArrayData, t arrow.DataType) error {
	n := d.Len()
	if n == 0 {
		return nil
	}
	width := 4
	if t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY {
		width = 8
	}
	get, err := c.offsets(d, width)
	if err != nil {
		return err
	}
	data := buffer(d, 2)
	if err := c.checkOffsets(get, n, bufLen(data), "bytes of the data buffer"); err != nil {
		return err
	}
	if t.ID() != arrow.STRING && t.ID() != arrow.LARGE_STRING {
		return nil
	}
	if data == nil {
		return nil // every value is empty
	}
	b := data.Bytes()
	lo, hi := get(0), get(n)
	// One pass over the whole range, then each value must start on a
	// character: together that makes every value valid UTF-8. Only a
	// failure is searched value by value, to name the row.
	if utf8.Valid(b[lo:hi]) {
		for i := 1; i < n; i++ {
			if s := get(i); s < hi && !utf8.RuneStart(b[s]) {
				return c.fail(i, ErrMalformed, "value starts in the middle of a UTF-8 character (byte 0x%02x)", b[s])
			}
		}
		return nil
	}
	for i := 0; i < n; i++ {
		v := b[get(i):get(i+1)]
		if !utf8.Valid(v) {
			return c.fail(i, ErrMalformed, "invalid UTF-8 at byte %d of the value", invalidAt(v))
		}
	}
	return nil
}

// invalidAt returns the index of the first byte of b that is not part of a
// valid UTF-8 sequence.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// fixedSizeList checks the child's length against the list size and the
// child itself. A null item inside a non-null list is refused: walctl's
// Lance writer stores a fixed-size list as one fixed-width value.
func (c checker) fixedSizeList(d arrow.ArrayData, t *arrow.FixedSizeListType) error {
	kids := d.Children()
	if len(kids) != 1 || kids[0] == nil {
		return c.fail(-1, ErrMalformed, "a fixed_size_list needs one child array, has %d", len(kids))
	}
	kid := kids[0]
	dim := int64(t.Len())
	if dim <= 0 {
		return c.fail(-1, ErrMalformed, "fixed_size_list size %d is not positive", dim)
	}
	off, n := int64(d.Offset()), int64(d.Len())
	if int64(kid.Len())/dim < off+n { // no overflow for huge sizes
		return c.fail(-1, ErrMalformed, "child has %d items, %d rows of %d need more", kid.Len(), off+n, dim)
	}
	cc := c.child(t.ElemField().Name, func(j int) int {
		if p := int64(j)/dim - off; p >= 0 && p < n {
			return int(p)
		}
		return -1
	}, func(j int) string { return fmt.Sprintf("item %d", int64(j)%dim) })
	if err := cc.array(kid, t.Elem(), t.ElemField().Nullable); err != nil {
		return err
	}
	parentBits, kidBits := buffer(d, 0), buffer(kid, 0)
	if kid.NullN() == 0 || kidBits == nil {
		return nil
	}
	for r := int64(0); r < n; r++ {
		if parentBits != nil && !bitutil.BitIsSet(parentBits.Bytes(), int(off+r)) {
			continue
		}
		for k := int64(0); k < dim; k++ {
			j := (off+r)*dim + k
			if !bitutil.BitIsSet(kidBits.Bytes(), kid.Offset()+int(j)) {
				return cc.fail(int(j), ErrSchema, "null item inside a non-null fixed_size_list (walctl stores a list as one value: make the whole row null)")
			}
		}
	}
	return nil
}

// structArray checks each child: long enough for the struct's slots and
// valid itself. A child of a struct with nulls is checked as nullable (its
// slots under a null row are undefined).
func (c checker) structArray(d arrow.ArrayData, t *arrow.StructType) error {
	kids := d.Children()
	if len(kids) != t.NumFields() {
		return c.fail(-1, ErrMalformed, "struct has %d child arrays, its type %d fields", len(kids), t.NumFields())
	}
	off, n := d.Offset(), d.Len()
	for i, f := range t.Fields() {
		kid := kids[i]
		if kid == nil || kid.Len() < off+n {
			return c.fail(-1, ErrMalformed, "field %q has fewer slots than the struct", f.Name)
		}
		cc := c.child(f.Name, func(j int) int {
			if p := j - off; p >= 0 && p < n {
				return p
			}
			return -1
		}, func(int) string { return "" })
		if err := cc.array(kid, f.Type, f.Nullable || d.NullN() != 0); err != nil {
			return err
		}
	}
	return nil
}
