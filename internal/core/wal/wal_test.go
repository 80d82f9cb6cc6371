package wal

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// testRecord builds a record of n rows whose ids start at base.
func testRecord(t testing.TB, base int64, n int) arrow.RecordBatch {
	t.Helper()
	return makeRecord(base, n)
}

func makeRecord(base int64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(base + int64(i))
		b.Field(1).(*array.StringBuilder).Append("payload-" + string(rune('a'+i%26)))
	}
	return b.NewRecordBatch()
}

func openTest(t testing.TB, dir string, opts Options) *Engine {
	t.Helper()
	if opts.MaxGenerationAge == 0 {
		opts.MaxGenerationAge = -1
	}
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func mustCreate(t testing.TB, e *Engine, name string, shards int) {
	t.Helper()
	if _, err := e.CreateTable(context.Background(), name, testSchema, shards); err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t testing.TB, e Log, table string, shard int, base int64, n int) uint64 {
	t.Helper()
	rec := testRecord(t, base, n)
	defer rec.Release()
	pos, err := e.Append(context.Background(), table, shard, rec)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// readIDs returns the first id of each entry in from..to, keyed by position.
func readIDs(t testing.TB, e Log, table string, shard int, from, to uint64) map[uint64]int64 {
	t.Helper()
	out := map[uint64]int64{}
	err := e.Read(context.Background(), table, shard, from, to, func(en Entry) error {
		out[en.Position] = en.Record.Column(0).(*array.Int64).Value(0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{MaxGenerationBytes: 1500})
	mustCreate(t, e, "events", 2)
	for i := 1; i <= 20; i++ {
		if pos := mustAppend(t, e, "events", 1, int64(i*100), 3); pos != uint64(i) {
			t.Fatalf("append %d got position %d", i, pos)
		}
	}
	gens, err := e.Generations(context.Background(), "events", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) < 3 {
		t.Fatalf("expected size sealing to produce several generations, got %+v", gens)
	}
	e.Close()
	e = openTest(t, dir, Options{MaxGenerationBytes: 1500})
	for i := 21; i <= 25; i++ {
		if pos := mustAppend(t, e, "events", 1, int64(i*100), 3); pos != uint64(i) {
			t.Fatalf("append %d after reopen got position %d", i, pos)
		}
	}
	ids := readIDs(t, e, "events", 1, 1, 0)
	if len(ids) != 25 {
		t.Fatalf("read %d entries, want 25", len(ids))
	}
	for i := 1; i <= 25; i++ {
		if ids[uint64(i)] != int64(i*100) {
			t.Fatalf("position %d has id %d, want %d", i, ids[uint64(i)], i*100)
		}
	}
	if got := readIDs(t, e, "events", 0, 1, 0); len(got) != 0 {
		t.Fatalf("shard 0 should be empty, read %v", got)
	}
}

func runtimeGosched() { time.Sleep(time.Millisecond) }
