package lancefile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

var schema21 = arrow.NewSchema([]arrow.Field{
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary},
	{Name: "vec", Type: arrow.FixedSizeListOf(96, arrow.PrimitiveTypes.Float32), Nullable: true},
}, nil)

// batch21 builds rows [from, from+n); every row is null when allNull.
func batch21(from, n int, allNull bool) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema21)
	defer b.Release()
	for r := from; r < from+n; r++ {
		null := allNull || r%5 == 2
		if null {
			b.Field(0).AppendNull()
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
			b.Field(4).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(int64(r) * 3)
			b.Field(1).(*array.BooleanBuilder).Append(r%3 == 0)
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("s%d", r))
			vb := b.Field(4).(*array.FixedSizeListBuilder)
			vb.Append(true)
			for k := range 96 {
				vb.ValueBuilder().(*array.Float32Builder).Append(float32(r + k))
			}
		}
		// Long values from row 6000 on: those pages switch to full-zip.
		v := bytes.Repeat([]byte{byte(r)}, 1+r%7)
		if r >= 6000 {
			v = bytes.Repeat(v, 300)
		}
		b.Field(3).(*array.BinaryBuilder).Append(v)
	}
	return b.NewRecord()
}

func writeFile21(t *testing.T, maxPage int, recs ...arrow.Record) *File {
	t.Helper()
	s, err := FromArrow(schema21)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, s, Options{Version: V2_1, MaxPageBytes: maxPage})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.lance")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// layouts counts a column's pages by layout and its mini-block chunks.
func layouts(t *testing.T, f *File, col int) (map[int]int, int) {
	t.Helper()
	kinds := map[int]int{}
	chunks := 0
	for _, p := range f.cols[col].Pages {
		_, body, err := lancepb.DecodeAny(p.Encoding)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := lancepb.DecodePageLayout(body)
		if err != nil {
			t.Fatal(err)
		}
		kinds[pl.Kind]++
		if pl.Kind == lancepb.LayoutMiniBlock {
			chunks += int(p.BufferSizes[0]) / 2
		}
	}
	return kinds, chunks
}

// TestPage21Layouts writes pages of every 2.1 layout (several mini-block
// chunks per page, full-zip for wide values, all-null pages) and reads them
// back unchanged.
func TestPage21Layouts(t *testing.T) {
	recs := []arrow.Record{batch21(0, 5000, false), batch21(5000, 3, true), batch21(6000, 700, false)}
	sliced := recs[2].NewSlice(1, 700)
	defer sliced.Release()
	for _, r := range recs {
		defer r.Release()
	}
	f := writeFile21(t, 256<<10, recs[0], recs[1], sliced)
	want := map[string]struct{ miniBlock, fullZip, allNull, minChunks int }{
		"i64":  {2, 0, 1, 10}, // 512 values of 8 bytes per chunk
		"b":    {2, 0, 1, 2},
		"s":    {2, 0, 1, 10},
		"lbin": {2, 1, 0, 10}, // short values before row 6000, long after
		"vec":  {0, 4, 1, 0},  // 384-byte vectors, split in 256 KiB pages
	}
	for col, fd := range schema21.Fields() {
		kinds, chunks := layouts(t, f, col)
		w := want[fd.Name]
		if kinds[lancepb.LayoutMiniBlock] < w.miniBlock || kinds[lancepb.LayoutFullZip] < w.fullZip || kinds[lancepb.LayoutAllNull] != w.allNull || chunks < w.minChunks {
			t.Errorf("column %s: layouts %v with %d chunks, want at least %+v", fd.Name, kinds, chunks, w)
		}
		got, err := f.ReadColumn(col, fd.Name, fd.Type, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := array.Concatenate([]arrow.Array{recs[0].Column(col), recs[1].Column(col), sliced.Column(col)}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(exp, got) {
			t.Errorf("column %s differs after round trip", fd.Name)
		}
		exp.Release()
		got.Release()
	}
}

// TestDecode21DamagedPages truncates and garbles every buffer of every page:
// decoding fails with ErrCorrupt (or, for a garbled layout, ErrUnsupported)
// and never panics.
func TestDecode21DamagedPages(t *testing.T) {
	r := batch21(4970, 1100, false)
	defer r.Release()
	f := writeFile21(t, 1<<20, r)
	damaged := 0
	for col, fd := range schema21.Fields() {
		for pi, p := range f.cols[col].Pages {
			_, body, _ := lancepb.DecodeAny(p.Encoding)
			bufs := make([][]byte, len(p.BufferOffsets))
			for i := range bufs {
				bufs[i], _ = f.read(p.BufferOffsets[i], p.BufferSizes[i])
			}
			for i := range bufs {
				for _, damage := range []string{"truncate", "garble"} {
					b := append([]byte(nil), bufs[i]...)
					if damage == "truncate" {
						b = b[:len(b)/2]
					} else {
						for k := range b {
							b[k] ^= 0xa5
						}
					}
					bad := append([][]byte(nil), bufs...)
					bad[i] = b
					damaged++
					arr, err := decodePage21(body, bad, int(p.Length), fd.Type, memory.DefaultAllocator)
					if err == nil {
						arr.Release()
						if damage == "truncate" {
							t.Errorf("column %s page %d buffer %d truncated: decoded without error", fd.Name, pi, i)
						}
						continue
					}
					if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
						t.Errorf("column %s page %d buffer %d %s: %v", fd.Name, pi, i, damage, err)
					}
				}
			}
		}
	}
	if damaged < 16 {
		t.Fatalf("only %d damaged buffers decoded", damaged)
	}
}
