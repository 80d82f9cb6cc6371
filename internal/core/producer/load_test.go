package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// faultyLog injects faults into a real engine's appends: for the calls in
// applied, the append happens and then an ambiguous error is returned (the
// ACK was lost); for those in lost, an ambiguous error is returned and
// nothing is appended.
type faultyLog struct {
	wal.Log
	mu      sync.Mutex
	n       int
	applied map[int]bool
	lost    map[int]bool
}

func (f *faultyLog) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	if f.lost[n] {
		return 0, fmt.Errorf("connection lost before the request was sent: %w", errs.ErrUnavailable)
	}
	pos, err := f.Log.Append(ctx, table, shard, rec)
	if err == nil && f.applied[n] {
		return 0, fmt.Errorf("connection lost after the request was sent: %w", errs.ErrUnavailable)
	}
	return pos, err
}

func openTable(t *testing.T, shards int) (*wal.Engine, wal.TableInfo) {
	t.Helper()
	eng, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	info, err := eng.CreateTable(context.Background(), "t", schema, shards)
	if err != nil {
		t.Fatal(err)
	}
	return eng, info
}

// idsInWAL counts every id the table's shards hold.
func idsInWAL(t *testing.T, eng *wal.Engine, shards int) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for s := 0; s < shards; s++ {
		err := eng.Read(context.Background(), "t", s, 1, 0, func(e wal.Entry) error {
			ids := e.Record.Column(0).(*array.Int64)
			for i := 0; i < ids.Len(); i++ {
				seen[ids.Value(i)]++
			}
			return nil
		})
		if err != nil && !errors.Is(err, wal.ErrBeyondEnd) {
			t.Fatal(err)
		}
	}
	return seen
}

// Conservation under ambiguous failures: every ACKed id is in the WAL
// exactly once, an unknown one at most once, nothing else is there, and
// the producers' ranges do not interleave.
func TestLoadConservesUnderAmbiguousAppends(t *testing.T) {
	eng, info := openTable(t, 2)
	log := &faultyLog{Log: eng, applied: map[int]bool{3: true, 9: true}, lost: map[int]bool{5: true, 6: true}}
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the fake clock releases every backoff at once
		for ctx.Err() == nil {
			if clk.HasWaiters() {
				clk.Step(time.Hour)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	res, err := Load(ctx, log, LoadConfig{Table: "t", Info: info, Producers: 2, BatchRows: 10, MaxBytes: 4000,
		FirstID: 1, IDSpan: 1000, Retries: 5, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	seen := idsInWAL(t, eng, 2)
	want := map[int64]bool{}
	unknown := 0
	for p, r := range res {
		if r.FirstID != 1+int64(p)*1000 {
			t.Fatalf("producer %d starts at %d", p, r.FirstID)
		}
		for _, rg := range r.Acked {
			for id := rg.First; id <= rg.Last; id++ {
				if id < r.FirstID || id >= r.FirstID+1000 || seen[id] != 1 {
					t.Fatalf("ACKed id %d of producer %d: %d times in the WAL", id, p, seen[id])
				}
				want[id] = true
			}
		}
		for _, rg := range r.Unknown {
			unknown++
			for id := rg.First; id <= rg.Last; id++ {
				if seen[id] > 1 {
					t.Fatalf("unknown id %d: %d times", id, seen[id])
				}
				want[id] = true
			}
		}
	}
	for id := range seen {
		if !want[id] {
			t.Fatalf("id %d is in the WAL but neither ACKed nor unknown", id)
		}
	}
	if unknown == 0 || len(seen) < 2 {
		t.Fatalf("the faults were not exercised: %+v", res)
	}
}

// After Retries consecutive ambiguous failures a producer stops with the
// error; the result still lists what it did. A definite error stops at once.
func TestLoadStopsAfterRetries(t *testing.T) {
	eng, info := openTable(t, 1)
	lost := map[int]bool{}
	for i := 2; i < 100; i++ {
		lost[i] = true
	}
	clk := clocktesting.NewFakeClock(time.Now())
	go func() {
		for i := 0; i < 10000; i++ {
			if clk.HasWaiters() {
				clk.Step(time.Hour)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	res, err := Load(context.Background(), &faultyLog{Log: eng, lost: lost}, LoadConfig{Table: "t", Info: info, Producers: 1,
		BatchRows: 5, MaxBytes: 1 << 20, FirstID: 1, Retries: 2, Clock: clk})
	if !errors.Is(err, errs.ErrUnavailable) || res[0].Failures != 3 || len(res[0].Acked) != 1 || res[0].Acked[0] != (IDRange{1, 5}) ||
		len(res[0].Unknown) != 1 || res[0].Unknown[0] != (IDRange{6, 20}) || res[0].Error == "" {
		t.Fatalf("%v %+v", err, res)
	}
	info.Name = "nope"
	res, err = Load(context.Background(), eng, LoadConfig{Table: "nope", Info: info, Producers: 1, BatchRows: 5, MaxBytes: 1 << 20, Clock: clk})
	if !errors.Is(err, errs.ErrNotFound) || res[0].Failures != 1 || len(res[0].Unknown) != 0 {
		t.Fatalf("unknown table: %v %+v", err, res)
	}
}
