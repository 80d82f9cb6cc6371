package wal

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestSizeClasses(t *testing.T) {
	for _, tc := range []struct{ n, size int64 }{
		{64 << 10, 0}, {64<<10 + 1, 80 << 10}, {80 << 10, 80 << 10}, {80<<10 + 1, 96 << 10},
		{1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 256<<10}, {64 << 20, 64 << 20}, {64<<20 + 1, 0},
	} {
		pool, size := sizeClass(tc.n)
		if size != tc.size || (pool == nil) != (tc.size == 0) || size != 0 && size < tc.n {
			t.Errorf("sizeClass(%d) = %d, want %d", tc.n, size, tc.size)
		}
	}
}

// A read that recycles its buffers hands an entry's buffer back only once
// the last reference to its record is released: an entry the callback
// retains keeps its bytes while later entries are read (and earlier ones
// poisoned as their buffers return), and a released entry's buffer is
// poisoned at once. Every value read equals what was appended.
func TestRecycledBuffersReturnAfterTheLastRelease(t *testing.T) {
	SetPoisonRecycled(true)
	defer SetPoisonRecycled(false)
	e := openTest(t, t.TempDir(), Options{})
	mustCreate(t, e, "t", 1)
	const rows = 6000 // an entry of ~100 KiB: recycled
	for i := range 6 {
		mustAppend(t, e, "t", 0, int64(i*rows), rows)
	}
	ctx := RecycleBuffers(context.Background())
	poisoned := func(b []byte) bool { return len(bytes.Trim(b, "\xdb")) == 0 }
	var kept []arrow.RecordBatch
	var keptRaw [][]byte
	for pos := uint64(1); pos <= 6; pos++ { // one read per entry: a later read may take a returned buffer
		var raw []byte
		err := e.Read(ctx, "t", 0, pos, pos, func(en Entry) error {
			if _, size := sizeClass(int64(len(en.Raw))); size == 0 {
				t.Fatalf("entry of %d bytes is not recycled", len(en.Raw))
			}
			raw = en.Raw
			if pos%2 == 1 {
				en.Record.Retain()
				kept, keptRaw = append(kept, en.Record), append(keptRaw, raw)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if pos%2 == 0 && !poisoned(raw) {
			t.Fatalf("the buffer of released entry %d was not handed back", pos)
		}
	}
	for i, rec := range kept {
		if poisoned(keptRaw[i]) {
			t.Fatalf("the buffer of retained entry %d was handed back", 2*i+1)
		}
		ids := rec.Column(0).(*array.Int64).Int64Values()
		want := int64(2 * i * rows)
		if len(ids) != rows || ids[0] != want || ids[rows-1] != want+rows-1 || !slices.IsSorted(ids) {
			t.Fatalf("retained entry %d changed: ids %d…%d", 2*i+1, ids[0], ids[len(ids)-1])
		}
		rec.Release()
		if !poisoned(keptRaw[i]) {
			t.Fatalf("the buffer of entry %d was not handed back after its last release", 2*i+1)
		}
	}
	// Without the context a read never recycles.
	var raw []byte
	err := e.Read(context.Background(), "t", 0, 1, 1, func(en Entry) error {
		raw = en.Raw
		return nil
	})
	if err != nil || poisoned(raw) {
		t.Fatalf("a plain read's buffer was recycled (%v)", err)
	}
}

// A message the in-place decode cannot take apart is decoded by copying;
// its recycled buffer is handed back once, when decoding is over.
func TestRecycledBufferOfACopiedDecodeReturnsOnce(t *testing.T) {
	sb, err := EncodeSchema(testSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(0, 10)
	defer rec.Release()
	enc, err := encodeEntry("t", testSchema, sb, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.release()
	puts := 0
	raw := append([]byte(nil), enc.raw[:len(enc.raw)/2]...)
	if _, err := decodeEntryOwned(sb, raw, func() { puts++ }); err == nil {
		t.Fatal("a truncated entry decoded")
	}
	if puts != 1 {
		t.Fatalf("buffer handed back %d times", puts)
	}
}
