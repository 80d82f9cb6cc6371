package walcache

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/wal"
)

// log is a shard of n entries of 1000 int64 each (8000 bytes), built with a
// checked allocator so that leaks and early frees show; it counts what it
// is asked to read.
type log struct {
	mem   *memory.CheckedAllocator
	n     uint64
	reads []string
}

func (l *log) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	if to == 0 {
		to = l.n
	}
	l.reads = append(l.reads, fmt.Sprintf("%d-%d", from, to))
	for p := from; p <= to; p++ {
		b := array.NewInt64Builder(l.mem)
		for i := 0; i < 1000; i++ {
			b.Append(int64(p))
		}
		col := b.NewArray()
		b.Release()
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, 1000)
		col.Release()
		err := fn(wal.Entry{Position: p, Record: rec})
		rec.Release() // the entry is released when fn returns
		if err != nil {
			return err
		}
	}
	return nil
}

func size(r arrow.RecordBatch) int64 { return int64(r.Column(0).Len()) * 8 }

// read reads from..to through c and checks every entry's content.
func read(t *testing.T, c *Cache, l *log, from, to uint64) {
	t.Helper()
	next := from
	err := c.Read(context.Background(), l, "t", 0, from, to, func(e wal.Entry) error {
		if e.Position != next || e.Record.Column(0).(*array.Int64).Value(999) != int64(next) {
			return fmt.Errorf("entry %d holds %d, want position %d", e.Position, e.Record.Column(0).(*array.Int64).Value(999), next)
		}
		next++
		return nil
	})
	if err != nil || next != to+1 {
		t.Fatalf("read %d-%d: ended at %d: %v", from, to, next-1, err)
	}
}

// A second read of a range is served from the cache; the bytes cached and
// reserved never exceed the cache's size; least recently used entries go
// first; Close returns every byte and reference.
func TestCacheHitsBoundAndEviction(t *testing.T) {
	l := &log{mem: memory.NewCheckedAllocator(memory.DefaultAllocator), n: 100}
	b := budget.New(1 << 20)
	c := New(4*8000, b, size) // four entries
	read(t, c, l, 1, 3)
	read(t, c, l, 1, 3)
	if st := c.Stats(); st.Hits != 3 || st.Misses != 3 || st.HitRate != 0.5 || st.Bytes != 3*8000 || b.Reserved() != 3*8000 {
		t.Fatalf("after two reads of 1-3: %+v, reserved %d; want 3 hits, 3 misses, 24000 bytes", st, b.Reserved())
	}
	// 1-5: 1-3 hit, 4-5 read from the WAL; 1 is evicted to fit 5.
	read(t, c, l, 1, 5)
	if got := l.reads[len(l.reads)-1]; got != "4-5" {
		t.Fatalf("WAL read %s, want only the uncached 4-5", got)
	}
	st := c.Stats()
	if st.Bytes > st.MaxBytes || st.PeakBytes > st.MaxBytes || st.Evictions != 1 || st.Entries != 4 || b.Reserved() != st.Bytes {
		t.Fatalf("after 1-5: %+v reserved %d; want within 32000 bytes, 1 eviction, 4 entries", st, b.Reserved())
	}
	read(t, c, l, 1, 1) // evicted: read again from the WAL
	if got := l.reads[len(l.reads)-1]; got != "1-1" {
		t.Fatalf("WAL read %s, want 1-1 (evicted)", got)
	}
	c.Close()
	if b.Reserved() != 0 {
		t.Fatalf("reserved %d after Close", b.Reserved())
	}
	l.mem.AssertSize(t, 0)
}

// The cache never waits for the budget: with no free bytes an entry is read
// and handed on but not cached. A record a reader retained outlives its
// eviction.
func TestCacheSkipsWhenBudgetFullAndKeepsRetainedRecords(t *testing.T) {
	l := &log{mem: memory.NewCheckedAllocator(memory.DefaultAllocator), n: 100}
	b := budget.New(8000)
	if !b.TryReserve(8000) { // a merge holds the whole budget
		t.Fatal("reserve")
	}
	c := New(1<<20, b, size)
	read(t, c, l, 1, 2)
	if st := c.Stats(); st.Skipped != 2 || st.Entries != 0 {
		t.Fatalf("%+v: want 2 skipped, nothing cached", st)
	}
	b.Release(8000)

	c2 := New(8000, b, size) // one entry
	var kept arrow.RecordBatch
	err := c2.Read(context.Background(), l, "t", 0, 7, 7, func(e wal.Entry) error {
		e.Record.Retain()
		kept = e.Record
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	read(t, c2, l, 8, 8) // evicts 7
	if v := kept.Column(0).(*array.Int64).Value(0); v != 7 {
		t.Fatalf("retained record holds %d after eviction, want 7", v)
	}
	kept.Release()
	c2.Close()
	l.mem.AssertSize(t, 0)
}

// A merge that would wait for bytes the cache holds gets them at once: the
// cache is the budget's reclaimer and drops least recently used entries.
func TestCacheYieldsItsBytesToAWaitingMerge(t *testing.T) {
	l := &log{mem: memory.NewCheckedAllocator(memory.DefaultAllocator), n: 100}
	b := budget.New(10 * 8000)
	c := New(4*8000, b, size)
	read(t, c, l, 1, 4) // the cache holds 32000 of the 80000 bytes
	if err := b.Reserve(context.Background(), 7*8000, "merge"); err != nil {
		t.Fatal(err) // without reclaiming it would wait forever (nothing else releases)
	}
	st := c.Stats()
	if st.Entries != 3 || st.Reclaimed != 1 || b.Reserved() != 7*8000+3*8000 {
		t.Fatalf("%+v, reserved %d: want one entry (the oldest) reclaimed", st, b.Reserved())
	}
	read(t, c, l, 2, 4) // 2-4 are still cached
	if got := l.reads[len(l.reads)-1]; got != "1-4" {
		t.Fatalf("WAL read %s after the reclaim, want none beyond the first 1-4", got)
	}
	b.Release(7 * 8000)
	c.Close()
	l.mem.AssertSize(t, 0)
}
