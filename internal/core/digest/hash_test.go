package digest

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// A digest depends on the multiset of rows only: order and batching do not
// matter, content (a null against an empty string, a changed value) does,
// and parts add up.
func TestDigestIsAMultisetDigest(t *testing.T) {
	a := batch(t, []int64{1, 2, 3}, []*string{s("x"), nil, s("")})
	b := batch(t, []int64{3, 1}, []*string{s(""), s("x")})
	c := batch(t, []int64{2}, []*string{nil})
	var whole, parts Digest
	whole.Add(a)
	parts.Add(b)
	parts.Add(c)
	if whole != parts || whole.Rows != 3 {
		t.Fatalf("same rows, other order and batching: %+v vs %+v", whole, parts)
	}
	var bd, cd Digest
	bd.Add(b)
	cd.Add(c)
	if bd.Plus(cd) != whole || whole.Minus(cd) != bd {
		t.Fatalf("parts do not add up: %+v + %+v != %+v", bd, cd, whole)
	}
	nullVsEmpty := batch(t, []int64{2}, []*string{s("")})
	if Rows(nullVsEmpty)[0] == Rows(c)[0] {
		t.Fatal("a null and an empty string hash alike")
	}
	var dup Digest
	dup.Add(a)
	dup.Add(c)
	if dup.Rows != 4 || dup == whole {
		t.Fatalf("a duplicated row does not change the digest: %+v", dup)
	}
}

// Digests outlive the process that wrote them: the hash has no seed. This
// pins the value so a change of the hashing (which would make every
// recorded digest disagree with its table) cannot go unnoticed.
func TestRowHashIsStable(t *testing.T) {
	got := Rows(batch(t, []int64{42}, []*string{s("walctl")}))[0]
	const want = 0x482e17d5a8c6e818
	if got != want {
		t.Fatalf("row hash %#x, recorded digests were made with %#x", got, uint64(want))
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
