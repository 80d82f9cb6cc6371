package digest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// allTypes is a batch of every type the hash has a case for (and one it
// has none for: uint16), with nulls at every level.
func allTypes(t *testing.T) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	rows := []string{
		`{"i64": -1, "i32": -2, "i16": -3, "i8": -4, "u64": 18446744073709551615, "u32": 4294967295, "u16": 65535, "f64": -0.5, "f32": 1.25, "b": true, "ts": 1700000000000000, "s": "walctl", "ls": "large", "bin": "AAEC", "lbin": "/w==", "vec": [1, null, 3], "list": [1, 2, null], "st": {"a": 7, "s": "x"}}`,
		`{"i64": null, "i32": null, "i16": null, "i8": null, "u64": null, "u32": null, "u16": null, "f64": null, "f32": null, "b": null, "ts": null, "s": null, "ls": null, "bin": null, "lbin": null, "vec": null, "list": null, "st": null}`,
		`{"i64": 0, "i32": 0, "i16": 0, "i8": 0, "u64": 0, "u32": 0, "u16": 0, "f64": 0, "f32": 0, "b": false, "ts": 0, "s": "", "ls": "", "bin": "", "lbin": "", "vec": [0, 0, 0], "list": [], "st": {"a": null, "s": null}}`,
		`{"i64": 9223372036854775807, "i32": 2147483647, "i16": 32767, "i8": 127, "u64": 1, "u32": 2, "u16": 3, "f64": 1e300, "f32": -3.5, "b": true, "ts": -1, "s": "é\u0000z", "ls": "ß", "bin": "AA==", "lbin": "AAAA", "vec": [null, null, null], "list": [null], "st": {"a": -1, "s": ""}}`,
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader("["+strings.Join(rows, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// The row hashes of every type are pinned, for both hashes, whole batch and
// a slice of it (arrays with an offset): recorded digests were made with
// these values, so a faster hashing must reproduce them byte for byte.
func TestRowHashOfEveryTypeIsStable(t *testing.T) {
	rec := allTypes(t)
	for h, want := range map[Hash]string{
		Canonical: "[0x4f4404ad0aa0ad03 0x2ddb5b91456e31e 0xd3efca800c0e617f 0x108a89822f275830]",
		Columns:   "[0x279cd52d3834e6ed 0xa106c285cd88f82d 0xb794adcf98b51af4 0x7597f88b1ac00449]",
	} {
		if got := fmt.Sprintf("%#x", h.Rows(rec)); got != want {
			t.Errorf("hash %d: row hashes %s, recorded digests were made with %s", h, got, want)
		}
		sl := rec.NewSlice(1, 4)
		if gotSlice, wantSlice := fmt.Sprintf("%#x", h.Rows(sl)), fmt.Sprintf("%#x", h.Rows(rec)[1:]); gotSlice != wantSlice {
			t.Errorf("hash %d: a slice hashes its rows otherwise: %s, want %s", h, gotSlice, wantSlice)
		}
	}
}

// Every column counts, with either hash: swapping one column's values
// between row 0 (no nulls) and row 1 (all null) changes both rows' hashes.
func TestEveryColumnChangesTheRowHash(t *testing.T) {
	rec := allTypes(t)
	for _, h := range []Hash{Canonical, Columns} {
		base := h.Rows(rec)
		for c := range int(rec.NumCols()) {
			col := rec.Column(c)
			swapped, err := array.Concatenate([]arrow.Array{array.NewSlice(col, 1, 2), array.NewSlice(col, 0, 1), array.NewSlice(col, 2, 4)}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			cols := slices.Clone(rec.Columns())
			cols[c] = swapped
			got := h.Rows(array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()))
			if got[0] == base[0] || got[1] == base[1] || got[2] != base[2] {
				t.Errorf("hash %d, column %s swapped between rows 0 and 1: %#x, unswapped %#x", h, rec.Schema().Field(c).Name, got, base)
			}
		}
	}
}

// The Columns hash depends on values, not on the type's width or layout:
// a string and a large string of the same bytes hash alike, and so do a
// binary and a large binary, a list read from a batch's slice and the same
// list alone.
func TestColumnsHashIgnoresLayout(t *testing.T) {
	one := func(ty arrow.DataType, js string) uint64 {
		t.Helper()
		sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: ty, Nullable: true}}, nil)
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return ColumnRows(rec.NewSlice(rec.NumRows()-1, rec.NumRows()))[0]
	}
	if one(arrow.BinaryTypes.String, `[{"v": "ab"}]`) != one(arrow.BinaryTypes.LargeString, `[{"v": "ab"}]`) {
		t.Error("string and large string of the same bytes hash otherwise")
	}
	if one(arrow.BinaryTypes.Binary, `[{"v": "AAE="}]`) != one(arrow.BinaryTypes.LargeBinary, `[{"v": "AAE="}]`) {
		t.Error("binary and large binary of the same bytes hash otherwise")
	}
	vec := arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)
	if one(vec, `[{"v": [9, 8]}, {"v": [1.5, -2]}]`) != one(vec, `[{"v": [1.5, -2]}]`) {
		t.Error("a vector after another hashes otherwise than alone")
	}
	if one(vec, `[{"v": [1.5, -2]}]`) == one(vec, `[{"v": [-2, 1.5]}]`) {
		t.Error("a vector's element order does not count")
	}
	list := arrow.ListOf(arrow.PrimitiveTypes.Int32)
	if one(list, `[{"v": [1]}]`) == one(list, `[{"v": [1, 0]}]`) || one(list, `[{"v": []}]`) == one(list, `[{"v": null}]`) {
		t.Error("a list's length or nullness does not count")
	}
}
