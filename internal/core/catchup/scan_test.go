package catchup_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/wal"
)

// The scan on the real WAL engine (what `walctl backlog scan` runs on the
// embedded default): sealed generations above the watermark (none
// published yet) are counted per shard and summed, and the result is what
// admission then reads.
func TestScanRealWAL(t *testing.T) {
	e := newEnv(t, func(p *catchup.Policy) { p.ThresholdGenerations = 3 })
	w, err := wal.Open(t.TempDir(), wal.Options{MaxGenerationAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := w.CreateTable(e.ctx, "t1", schema, 2); err != nil {
		t.Fatal(err)
	}
	for shard, gens := range []int{2, 1} {
		for g := 0; g < gens; g++ {
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			b.Field(0).(*array.Int64Builder).Append(int64(g))
			rec := b.NewRecordBatch()
			b.Release()
			if _, err := w.Append(e.ctx, "t1", shard, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			if _, err := w.Seal(e.ctx, "t1", shard); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Nothing published yet (watermarks.FromLance, tested in its package, says the
	// same for a table without a dataset; not used here so that this
	// package's tests do not depend on the Lance code).
	none := func(context.Context, string) (map[int]uint64, error) { return map[int]uint64{}, nil }
	rows, err := catchup.NewScanner(e.store, w, none).Scan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].PendingGenerations != 3 || len(rows[0].Shards) != 2 || rows[0].PendingBytes <= 0 {
		t.Fatalf("scan %+v", rows)
	}
	e.wantDecision(e.admit(e.master, "t1"), catchup.DecisionReserved)
}
