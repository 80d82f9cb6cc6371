package arrowcheck_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
)

// readAll decodes every batch of stream.
func readAll(stream []byte) error {
	r, err := arrowcheck.NewStreamReader(stream)
	if err != nil {
		return err
	}
	defer r.Release()
	for r.Next() {
	}
	return r.Err()
}

// TestHostileStreamsBounded: every hostile stream is refused, naming what
// is wrong (ErrMalformed where a message is refused, a truncation where
// the framing lies), and decoding it allocates within DecodeBudget of its
// size. Before, arrow-go allocated what the stream declared: "fatal error:
// out of memory" on a 1 TiB LZ4 or ZSTD buffer or a 2^40 variadic buffer
// count, 538 MB for a 376-byte ZSTD window. Each case runs in a child
// process with a bounded address space (arrowchecktest.InChild).
func TestHostileStreamsBounded(t *testing.T) {
	for _, c := range arrowchecktest.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			if !arrowchecktest.InChild(t) {
				return
			}
			var err error
			n := arrowchecktest.Allocated(func() { err = readAll(c.Stream) })
			bound := uint64(arrowcheck.DecodeBudget(len(c.Stream)) + 1<<20)
			if n > bound {
				t.Errorf("decoding %d bytes allocated %d bytes, bound %d", len(c.Stream), n, bound)
			}
			if err == nil || !strings.Contains(err.Error(), c.Want) {
				t.Errorf("got %v, want an error naming %q", err, c.Want)
			}
		})
	}
}

// TestCompressedStreamsDecode: streams arrow-go writes compressed (LZ4, as
// Feather files are, and ZSTD) — every stored type, the fixture, view
// columns (also inside a struct: one variadic buffer count each),
// dictionaries — decode, through NewMessage's own decompression, to the
// batches of the uncompressed stream.
func TestCompressedStreamsDecode(t *testing.T) {
	_, all := arrowchecktest.AllTypes()
	dict := dictionaryStream()
	for name, plain := range map[string][]byte{"alltypes": all, "fixture": arrowchecktest.Valid(),
		"views": arrowchecktest.StringViews(), "nested-views": nestedViews(), "int64s": arrowchecktest.CompressedInt64s(),
		"dictionary": dict} {
		want := readBatches(t, plain)
		for codec, opt := range map[string]ipc.Option{"lz4": ipc.WithLZ4(), "zstd": ipc.WithZstd()} {
			t.Run(name+"/"+codec, func(t *testing.T) {
				stream := reencode(t, plain, opt)
				got := readBatches(t, stream)
				if len(got) != len(want) {
					t.Fatalf("%d batches, want %d", len(got), len(want))
				}
				for i := range got {
					if !array.RecordEqual(got[i], want[i]) {
						t.Fatalf("batch %d differs:\n%v\n%v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

func readBatches(t *testing.T, stream []byte) []arrow.RecordBatch {
	t.Helper()
	r, err := arrowcheck.NewStreamReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	var out []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		t.Cleanup(rec.Release)
		out = append(out, rec)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	return out
}

// reencode writes the batches of stream again with opt.
func reencode(t *testing.T, stream []byte, opt ipc.Option) []byte {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(r.Schema()), opt)
	for r.Next() {
		if err := w.Write(r.RecordBatch()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dictionaryStream is two batches of a dictionary-encoded string column
// (repetitive enough to compress).
func dictionaryStream() []byte {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	s := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt}}, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	for range 2 {
		b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
		for i := range 512 {
			b.AppendString([]string{"alpha", "beta", "gamma"}[i%3])
		}
		col := b.NewArray()
		rec := array.NewRecordBatch(s, []arrow.Array{col}, 512)
		if err := w.Write(rec); err != nil {
			panic(err)
		}
		rec.Release()
		col.Release()
		b.Release()
	}
	w.Close()
	return buf.Bytes()
}

// nestedViews is a batch of a binary_view column and a struct of a
// string_view, values longer than 12 bytes: three view arrays to load.
func nestedViews() []byte {
	st := arrow.StructOf(arrow.Field{Name: "s", Type: arrow.BinaryTypes.StringView})
	s := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.BinaryTypes.BinaryView}, {Name: "st", Type: st},
		{Name: "v", Type: arrow.BinaryTypes.StringView}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i := range 64 {
		v := strings.Repeat("view value ", 2+i%3)
		b.Field(0).(*array.BinaryViewBuilder).Append([]byte(v))
		sb := b.Field(1).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringViewBuilder).Append(v)
		b.Field(2).(*array.StringViewBuilder).Append(v)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return arrowchecktest.Encode(s, rec)
}
