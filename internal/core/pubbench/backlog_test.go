package pubbench

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/wal"
)

// A backlog is the bytes asked for, every entry ACKed once with unique
// ids inside [FirstID, LastID], and every shard sealed with nothing open.
func TestMakeBacklog(t *testing.T) {
	log, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ctx := context.Background()
	var mu sync.Mutex
	ids := map[int64]bool{}
	var acked int64
	bl, err := MakeBacklog(ctx, log, BacklogOptions{Table: "t", Shards: 3, Bytes: 256 << 10, EntryBytes: 16 << 10, FirstID: 7,
		OnAck: func(b arrow.RecordBatch) {
			mu.Lock()
			defer mu.Unlock()
			acked++
			col := b.Column(0).(*array.Int64)
			for i := range col.Len() {
				if ids[col.Value(i)] {
					t.Errorf("id %d appended twice", col.Value(i))
				}
				ids[col.Value(i)] = true
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if bl.Bytes < 256<<10 || bl.Entries != acked || bl.Rows != int64(len(ids)) || bl.FirstID != 7 {
		t.Fatalf("backlog %+v: %d entries and %d ids ACKed", bl, acked, len(ids))
	}
	for id := range ids {
		if id < bl.FirstID || id > bl.LastID {
			t.Fatalf("id %d outside [%d, %d]", id, bl.FirstID, bl.LastID)
		}
	}
	st, err := log.Stats(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	var entries int64
	for _, sh := range st.Shards {
		if sh.OpenGenerations != 0 || sh.SealedGenerations == 0 {
			t.Fatalf("shard %d: %d open, %d sealed generations", sh.Shard, sh.OpenGenerations, sh.SealedGenerations)
		}
		entries += sh.Entries
	}
	if entries != bl.Entries {
		t.Fatalf("the WAL holds %d entries, the backlog says %d", entries, bl.Entries)
	}
}

// A cancelled backlog is an error: the caller must not publish half of it
// as if it were whole.
func TestMakeBacklogCancelled(t *testing.T) {
	log, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MakeBacklog(ctx, log, BacklogOptions{Table: "t", Bytes: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
