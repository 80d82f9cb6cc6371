package arrowcheck

import (
	"fmt"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checker validates one array (a column or a nested child). path is the
// column's dotted name; loc maps an index of the array (0 = its first
// logical slot) to the row of the batch and a place inside that row.
type checker struct {
	path string
	loc  func(i int) (int, string)
}

func topRow(i int) (int, string) { return i, "" }

// fail reports a fault at index i of the array (-1: not at one index).
func (c checker) fail(i int, kind error, format string, a ...any) error {
	row, where := -1, ""
	if i >= 0 {
		row, where = c.loc(i)
	}
	return &Error{Column: c.path, Row: row, Where: where, Reason: fmt.Sprintf(format, a...), kind: kind}
}

// child returns the checker of a nested array named name whose index j
// lies in the slot of this array that parent(j) returns (-1: none), at the
// place that where(j) describes.
func (c checker) child(name string, parent func(j int) int, where func(j int) string) checker {
	return checker{path: c.path + "." + name, loc: func(j int) (int, string) {
		p := parent(j)
		if p < 0 {
			return -1, fmt.Sprintf("(unreferenced child slot %d)", j)
		}
		row, w := c.loc(p)
		if w != "" {
			return row, w + " " + where(j)
		}
		return row, where(j)
	}}
}

// buffer returns buffer i of d, or nil when d has fewer buffers.
func buffer(d arrow.ArrayData, i int) *memory.Buffer {
	if b := d.Buffers(); i < len(b) {
		return b[i]
	}
	return nil
}

func bufLen(b *memory.Buffer) int64 {
	if b == nil {
		return 0
	}
	return int64(b.Len())
}

// array validates d, which must have type typ; a null in it is refused
// unless nullable.
func (c checker) array(d arrow.ArrayData, typ arrow.DataType, nullable bool) error {
	if !arrow.TypeEqual(d.DataType(), typ) {
		return c.fail(-1, ErrMalformed, "data has type %s, the field %s", d.DataType(), typ)
	}
	off, n := d.Offset(), d.Len()
	if off < 0 || n < 0 || off > math.MaxInt32 || n > math.MaxInt32 {
		return c.fail(-1, ErrMalformed, "offset %d and length %d out of range", off, n)
	}
	if !hasOwnChecks(typ) {
		return c.fallback(d)
	}
	firstNull, err := c.validity(d)
	if err != nil {
		return err
	}
	if firstNull >= 0 && !nullable {
		return c.fail(firstNull, ErrSchema, "null in a non-nullable column")
	}
	switch t := typ.(type) {
	case *arrow.BooleanType:
		if n > 0 && bufLen(buffer(d, 1)) < int64(bitutil.BytesForBits(int64(off+n))) {
			return c.fail(-1, ErrMalformed, "value bitmap of %d bytes is too short for %d rows", bufLen(buffer(d, 1)), n)
		}
		return nil
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return c.varBinary(d, t)
	case *arrow.FixedSizeListType:
		return c.fixedSizeList(d, t)
	case arrow.ListLikeType: // list, large_list, map (fixed-size lists are above)
		return c.list(d, t)
	case *arrow.StructType:
		return c.structArray(d, t)
	case arrow.FixedWidthDataType:
		width := int64(t.BitWidth() / 8)
		if width <= 0 {
			return c.fail(-1, ErrMalformed, "type %s has no byte width", typ)
		}
		if n > 0 && bufLen(buffer(d, 1))/width < int64(off+n) { // no overflow for huge widths
			return c.fail(-1, ErrMalformed, "value buffer of %d bytes is too short for %d values of %d bytes", bufLen(buffer(d, 1)), off+n, width)
		}
		return nil
	}
	return c.fallback(d)
}

// hasOwnChecks reports whether array validates typ itself; other types
// (unions, views, run-end encoded, dictionaries, extensions, null) go to
// arrow-go's ValidateFull.
func hasOwnChecks(typ arrow.DataType) bool {
	switch typ.ID() {
	case arrow.NULL, arrow.SPARSE_UNION, arrow.DENSE_UNION, arrow.RUN_END_ENCODED, arrow.DICTIONARY,
		arrow.EXTENSION, arrow.STRING_VIEW, arrow.BINARY_VIEW, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW,
		arrow.DECIMAL32, arrow.DECIMAL64, arrow.INTERVAL_MONTH_DAY_NANO:
		return false
	}
	if _, ok := typ.(arrow.FixedWidthDataType); ok {
		return true
	}
	switch typ.(type) {
	case arrow.ListLikeType, *arrow.StructType, *arrow.StringType, *arrow.BinaryType,
		*arrow.LargeStringType, *arrow.LargeBinaryType:
		return true
	}
	return false
}

// fallback validates an array of a type walctl does not store with arrow-go.
func (c checker) fallback(d arrow.ArrayData) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = c.fail(-1, ErrMalformed, "arrow-go validation: %v", r)
		}
	}()
	arr := array.MakeFromData(d)
	defer arr.Release()
	if err := array.ValidateFull(arr); err != nil {
		return c.fail(-1, ErrMalformed, "%v", err)
	}
	return nil
}

// validity checks the validity bitmap against the declared null count and
// returns the index of the first null (-1: none).
func (c checker) validity(d arrow.ArrayData) (int, error) {
	off, n := d.Offset(), d.Len()
	declared := d.NullN()
	bm := buffer(d, 0)
	if bm == nil || n == 0 {
		if declared > 0 && n > 0 {
			return -1, c.fail(-1, ErrMalformed, "null count is %d but there is no validity bitmap", declared)
		}
		return -1, nil
	}
	if bufLen(bm) < int64(bitutil.BytesForBits(int64(off+n))) {
		return -1, c.fail(-1, ErrMalformed, "validity bitmap of %d bytes is too short for %d rows", bm.Len(), n)
	}
	bits := bm.Bytes()
	actual := n - bitutil.CountSetBits(bits, off, n)
	first := -1
	if actual > 0 {
		for i := 0; i < n; i++ {
			if !bitutil.BitIsSet(bits, off+i) {
				first = i
				break
			}
		}
	}
	if declared != actual && declared != array.UnknownNullCount {
		if declared < actual {
			return -1, c.fail(first, ErrMalformed, "is null in the validity bitmap, which has %d nulls, but the null count is %d", actual, declared)
		}
		return -1, c.fail(-1, ErrMalformed, "null count is %d but the validity bitmap has %d nulls", declared, actual)
	}
	return first, nil
}

// offsets returns the n+1 offsets of slots [off, off+n) of d as int64s
// through get, after checking the offsets buffer is long enough. width is
// 4 or 8 bytes.
func (c checker) offsets(d arrow.ArrayData, width int) (func(i int) int64, error) {
	off, n := d.Offset(), d.Len()
	b := buffer(d, 1)
	if need := int64(off+n+1) * int64(width); bufLen(b) < need {
		return nil, c.fail(-1, ErrMalformed, "offsets buffer of %d bytes is too short for %d rows (needs %d)", bufLen(b), n, need)
	}
	if width == 8 {
		o := arrow.Int64Traits.CastFromBytes(b.Bytes())[off : off+n+1]
		return func(i int) int64 { return o[i] }, nil
	}
	o := arrow.Int32Traits.CastFromBytes(b.Bytes())[off : off+n+1]
	return func(i int) int64 { return int64(o[i]) }, nil
}

// checkOffsets checks that the offsets of rows [0, n) are non-negative,
// monotonic and within limit (the data buffer or child length).
func (c checker) checkOffsets(get func(int) int64, n int, limit int64, what string) error {
	if first := get(0); first < 0 || first > limit {
		return c.fail(0, ErrMalformed, "starts at offset %d, outside the %d %s", first, limit, what)
	}
	for i := 0; i < n; i++ {
		start, end := get(i), get(i+1)
		if end < start {
			return c.fail(i, ErrMalformed, "ends at offset %d before it starts at %d (offsets not monotonic)", end, start)
		}
		if end > limit {
			return c.fail(i, ErrMalformed, "ends at offset %d (0x%x), beyond the %d %s", end, end, limit, what)
		}
	}
	return nil
}

// listParent returns, for the child of a list whose slots are described by
// get over n rows, the row that holds child slot j (-1: none).
func listParent(get func(int) int64, n int) func(j int) int {
	return func(j int) int {
		// the last row whose start is <= j and whose end is > j
		r := sort.Search(n, func(i int) bool { return get(i+1) > int64(j) })
		if r < n && get(r) <= int64(j) {
			return r
		}
		return -1
	}
}

func (c checker) list(d arrow.ArrayData, t arrow.ListLikeType) error {
	kids := d.Children()
	if len(kids) != 1 || kids[0] == nil {
		return c.fail(-1, ErrMalformed, "a list needs one child array, has %d", len(kids))
	}
	kid := kids[0]
	n := d.Len()
	width := 4
	if t.ID() == arrow.LARGE_LIST {
		width = 8
	}
	if n > 0 {
		get, err := c.offsets(d, width)
		if err != nil {
			return err
		}
		if err := c.checkOffsets(get, n, int64(kid.Len()), "child values"); err != nil {
			return err
		}
		parent := listParent(get, n)
		cc := c.child(t.ElemField().Name, parent, func(j int) string {
			return fmt.Sprintf("element %d", int64(j)-get(parent(j)))
		})
		return cc.array(kid, t.Elem(), t.ElemField().Nullable)
	}
	cc := c.child(t.ElemField().Name, func(int) int { return -1 }, func(int) string { return "" })
	return cc.array(kid, t.Elem(), t.ElemField().Nullable)
}
