package wal

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestAppendBatch: a batch lands at consecutive positions with one call; a
// batch holding one record of another schema writes nothing.
func TestAppendBatch(t *testing.T) {
	e := openTest(t, t.TempDir(), Options{MaxGenerationBytes: 4096})
	mustCreate(t, e, "t", 1)
	ctx := context.Background()
	var recs []arrow.RecordBatch
	for i := 0; i < 40; i++ {
		recs = append(recs, testRecord(t, int64(i*10), 10))
	}
	pos, err := e.AppendBatch(ctx, "t", 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pos {
		if p != uint64(i+1) {
			t.Fatalf("positions %v", pos)
		}
	}
	gens, _ := e.Generations(ctx, "t", 0)
	if len(gens) < 2 {
		t.Fatalf("a 4 KiB generation limit did not rotate within the batch: %+v", gens)
	}
	bad := int32Record(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil))
	if _, err := e.AppendBatch(ctx, "t", 0, []arrow.RecordBatch{recs[0], bad}); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("batch with a foreign record: %v", err)
	}
	st, _ := e.Stats(ctx, "t", nil)
	if st.Shards[0].LastPosition != 40 {
		t.Fatalf("a refused batch wrote: last position %d", st.Shards[0].LastPosition)
	}
	for _, r := range append(recs, bad) {
		r.Release()
	}
}
