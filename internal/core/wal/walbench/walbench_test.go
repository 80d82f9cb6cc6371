package walbench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/wal"
)

// TestRunSmall runs a tiny benchmark end to end and checks its bookkeeping.
func TestRunSmall(t *testing.T) {
	res, err := Run(context.Background(), Config{Dir: t.TempDir(), Producers: []int{1, 4}, EntryBytes: 16 << 10, BytesPerRun: 4 << 20, DDMiB: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.DD.MiBps <= 0 || len(res.Runs) != 2 || len(res.DDs) != 3 || res.DDAfter != res.DDs[2] {
		t.Fatalf("result %+v", res)
	}
	for _, r := range res.Runs {
		// 4 MiB budget in 16 KiB entries is 256 appends, each a bit larger
		// than its payload once encoded.
		if r.Appends != 256 || r.Bytes < 4<<20 || r.P99Ms < r.P50Ms || r.DDMiBps <= 0 || r.Ratio != r.MiBps/r.DDMiBps {
			t.Fatalf("run %+v", r)
		}
	}
}

// BenchmarkAppend measures durable appends of 256 KiB and 1 MiB batches with
// 1, 4 and 16 concurrent producers
// (go test -run - -bench Append ./internal/core/wal/walbench).
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct{ size, producers int }{
		{256 << 10, 1}, {256 << 10, 4}, {256 << 10, 16}, {1 << 20, 1}, {1 << 20, 4}, {1 << 20, 16},
	} {
		size, producers := bc.size, bc.producers
		b.Run(fmt.Sprintf("batch=%dKiB/producers=%d", size>>10, producers), func(b *testing.B) {
			e, err := wal.Open(b.TempDir(), wal.Options{MaxGenerationAge: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			if _, err := e.CreateTable(ctx, "bench", schema, 1); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			var n atomic.Int64
			n.Store(int64(b.N))
			var wg sync.WaitGroup
			recs := make([]arrow.RecordBatch, producers)
			for p := range recs {
				recs[p] = record(size)
				defer recs[p].Release()
			}
			b.ResetTimer()
			for _, rec := range recs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n.Add(-1) >= 0 {
						if _, err := e.Append(ctx, "bench", 0, rec); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
