package digest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func batch(t *testing.T, ids []int64, bodies []*string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		if bodies[i] == nil {
			b.Field(1).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*bodies[i])
		}
	}
	return b.NewRecordBatch()
}

func s(v string) *string { return &v }

// A digest depends on the multiset of rows only, with either row hash:
// order and batching do not matter, content (a null against an empty
// string, a changed value) does, and parts add up.
func TestDigestIsAMultisetDigest(t *testing.T) {
	for _, h := range []Hash{Canonical, Columns} {
		a := batch(t, []int64{1, 2, 3}, []*string{s("x"), nil, s("")})
		b := batch(t, []int64{3, 1}, []*string{s(""), s("x")})
		c := batch(t, []int64{2}, []*string{nil})
		var whole, parts Digest
		whole.Add(h, a)
		parts.Add(h, b)
		parts.Add(h, c)
		if whole != parts || whole.Rows != 3 {
			t.Fatalf("hash %d: same rows, other order and batching: %+v vs %+v", h, whole, parts)
		}
		var bd, cd Digest
		bd.Add(h, b)
		cd.Add(h, c)
		if bd.Plus(cd) != whole || whole.Minus(cd) != bd {
			t.Fatalf("hash %d: parts do not add up: %+v + %+v != %+v", h, bd, cd, whole)
		}
		nullVsEmpty := batch(t, []int64{2}, []*string{s("")})
		if h.Rows(nullVsEmpty)[0] == h.Rows(c)[0] {
			t.Fatalf("hash %d: a null and an empty string hash alike", h)
		}
		var dup Digest
		dup.Add(h, a)
		dup.Add(h, c)
		if dup.Rows != 4 || dup == whole {
			t.Fatalf("hash %d: a duplicated row does not change the digest: %+v", h, dup)
		}
		if h == Columns && h.Rows(a)[0] == CanonicalRows(a)[0] {
			t.Fatal("the Columns hash of a row equals its Canonical hash")
		}
	}
}

// Only the two known row hashes pass Check (a record names one).
func TestHashCheck(t *testing.T) {
	for h, ok := range map[Hash]bool{0: false, Canonical: true, Columns: true, 3: false, -1: false} {
		if err := h.Check(); (err == nil) != ok {
			t.Errorf("hash %d: Check() = %v", h, err)
		}
	}
}

// Digests outlive the process that wrote them: the hashes have no seed.
// This pins their values so a change of either (which would make every
// digest recorded with it disagree with its table) cannot go unnoticed.
func TestRowHashIsStable(t *testing.T) {
	rec := batch(t, []int64{42}, []*string{s("walctl")})
	for h, want := range map[Hash]uint64{Canonical: 0x482e17d5a8c6e818, Columns: 0x18de39fc9c52ecb3} {
		if got := h.Rows(rec)[0]; got != want {
			t.Errorf("hash %d: row hash %#x, recorded digests were made with %#x", h, got, want)
		}
	}
}

// appendFloat32s lays out, pair by pair, exactly the bytes one element at
// a time would (1, then the value's bits as 8 little-endian bytes), for
// even and odd lengths, after a prefix.
func TestAppendFloat32sMatchesOneByOne(t *testing.T) {
	vals := []float32{1.5, -0, float32(math.Inf(-1)), math.MaxFloat32, 3e-39, -7.25, 0.1}
	for n := 0; n <= len(vals); n++ {
		want := []byte{0xaa}
		for _, v := range vals[:n] {
			want = binary.LittleEndian.AppendUint64(append(want, 1), uint64(math.Float32bits(v)))
		}
		if got := appendFloat32s([]byte{0xaa}, vals[:n]); !bytes.Equal(got, want) {
			t.Fatalf("%d values: %x, want %x", n, got, want)
		}
	}
}

// The Columns hash is what ColumnRows' doc says, laid out by hand: one
// little-endian word per column (an int64's bits, xxHash64 of a string's
// bytes; 0 for a null), then the null mask.
func TestColumnsHashIsItsDefinition(t *testing.T) {
	rec := batch(t, []int64{42, -7}, []*string{s("walctl"), nil})
	var row0, row1 []byte
	row0 = binary.LittleEndian.AppendUint64(row0, 42)
	row0 = binary.LittleEndian.AppendUint64(row0, xxhash.Sum64String("walctl"))
	row0 = binary.LittleEndian.AppendUint64(row0, 0)
	row1 = binary.LittleEndian.AppendUint64(row1, uint64(0xfffffffffffffff9))
	row1 = binary.LittleEndian.AppendUint64(row1, 0)
	row1 = binary.LittleEndian.AppendUint64(row1, 1<<1)
	got := ColumnRows(rec)
	if want := []uint64{xxhash.Sum64(row0), xxhash.Sum64(row1)}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ColumnRows = %#x, by its definition %#x", got, want)
	}
}

// Rows appended after others (the pooled buffers Digest.Add reuses) hash
// exactly as alone, for both hashes, call after call.
func TestAppendedRowsHashAsAlone(t *testing.T) {
	a := batch(t, []int64{1, 2, 3}, []*string{s("x"), nil, s("")})
	b := batch(t, []int64{7, 8}, []*string{nil, s("y")})
	for _, h := range []Hash{Canonical, Columns} {
		got := h.appendRows(h.appendRows(nil, a), b)
		want := append(h.Rows(a), h.Rows(b)...)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("hash %d: appended %#x, alone %#x", h, got, want)
		}
		var d, sum Digest
		for range 3 {
			d.Add(h, b)
			d.Add(h, a)
		}
		for _, v := range append(want, append(want, want...)...) {
			sum.AddHash(v)
		}
		if d != sum {
			t.Fatalf("hash %d: Add %+v, summed %+v", h, d, sum)
		}
	}
}
