package walreplica

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

var arrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String},
}, nil)

// ledger is what producers know of their appends: the body digest of every
// ACKed id, and the ids of appends whose outcome was reported unknown
// (ErrOutcomeUnknown): those may be in the WAL at most once, never twice.
type ledger struct {
	mu       sync.Mutex
	acked    map[int64][32]byte
	unknown  map[int64]bool
	bytes    atomic.Int64
	ackCount atomic.Int64
}

func newLedger() *ledger { return &ledger{acked: map[int64][32]byte{}, unknown: map[int64]bool{}} }

// producer appends batches of rows×~1 KiB to one table's shard until stop.
// Errors other than an unknown outcome or an unavailable group fail t.
func produce(ctx context.Context, t *testing.T, log wal.Log, table string, shard int, firstID int64, l *ledger, stop *atomic.Bool) {
	gen, err := synth.New(arrowSchema, uint64(firstID))
	if err != nil {
		t.Error(err)
		return
	}
	gen.NextID, gen.StringBytes = firstID, 1000
	for !stop.Load() && ctx.Err() == nil {
		b := gen.Batch(64)
		_, err := log.Append(ctx, table, shard, b)
		ids, bodies := b.Column(0).(*array.Int64), b.Column(1).(*array.String)
		l.mu.Lock()
		switch {
		case err == nil:
			for i := 0; i < ids.Len(); i++ {
				l.acked[ids.Value(i)] = sha256.Sum256([]byte(bodies.Value(i)))
			}
			l.ackCount.Add(1)
			l.bytes.Add(int64(len(bodies.ValueBytes())))
		case errors.Is(err, walflight.ErrOutcomeUnknown):
			for i := 0; i < ids.Len(); i++ {
				l.unknown[ids.Value(i)] = true
			}
		case errors.Is(err, walflight.ErrServerUnavailable):
			// Not sent to any member that could have proposed it: its ids
			// must never show up.
		default:
			t.Errorf("append to %s/%d: %v", table, shard, err)
		}
		l.mu.Unlock()
		b.Release()
	}
}

// check compares ids (with their bodies) found somewhere against the
// ledger: every ACKed id exactly once with its body, an unknown one at most
// once, nothing else.
func (l *ledger) check(t *testing.T, where string, ids []int64, bodies [][32]byte) {
	t.Helper()
	seen := map[int64]int{}
	for i, id := range ids {
		seen[id]++
		want, ok := l.acked[id]
		switch {
		case ok && bodies != nil && bodies[i] != want:
			t.Fatalf("%s: id %d has another body than the one ACKed", where, id)
		case !ok && !l.unknown[id]:
			t.Fatalf("%s: id %d was never sent", where, id)
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("%s: id %d is there %d times", where, id, n)
		}
	}
	for id := range l.acked {
		if seen[id] != 1 {
			t.Fatalf("%s: ACKed id %d is missing (%d ACKed ids, %d found)", where, id, len(l.acked), len(ids))
		}
	}
	t.Logf("%s: %d ACKed ids each once, %d of %d unknown-outcome ids present", where, len(l.acked), len(ids)-len(l.acked), len(l.unknown))
}

// walIDs reads every entry of a table's shards through log, checks that
// positions are dense from 1, and returns ids and body digests.
func walIDs(ctx context.Context, t *testing.T, log wal.Log, table string, shards int) ([]int64, [][32]byte) {
	t.Helper()
	ids, bodies, err := readIDs(ctx, t, log, table, shards)
	if err != nil {
		t.Fatal(err)
	}
	return ids, bodies
}

// readIDs is walIDs returning the first read error instead of failing.
func readIDs(ctx context.Context, t *testing.T, log wal.Log, table string, shards int) ([]int64, [][32]byte, error) {
	t.Helper()
	var ids []int64
	var bodies [][32]byte
	for s := 0; s < shards; s++ {
		next := uint64(1)
		err := log.Read(ctx, table, s, 1, 0, func(e wal.Entry) error {
			if e.Position != next {
				t.Fatalf("%s shard %d: position %d after %d: not dense", table, s, e.Position, next-1)
			}
			next++
			col, bc := e.Record.Column(0).(*array.Int64), e.Record.Column(1).(*array.String)
			for i := 0; i < col.Len(); i++ {
				ids = append(ids, col.Value(i))
				bodies = append(bodies, sha256.Sum256([]byte(bc.Value(i))))
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read %s shard %d: %w", table, s, err)
		}
	}
	return ids, bodies, nil
}

// oracleIDs reads the table's latest version with the official LanceDB
// reader: ids and body digests.
func oracleIDs(ctx context.Context, t *testing.T, path string) ([]int64, [][32]byte) {
	t.Helper()
	o, err := oracle.Find()
	if err != nil {
		t.Fatal(err)
	}
	d, err := o.Dump(ctx, path, oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rawIDs, rawBodies := d.Columns["id"], d.Columns["body"]
	if len(rawIDs) != d.NumRows || len(rawBodies) != d.NumRows || d.CountRows != d.NumRows {
		t.Fatalf("official reader: %d rows, count %d, %d ids, %d bodies", d.NumRows, d.CountRows, len(rawIDs), len(rawBodies))
	}
	ids := make([]int64, len(rawIDs))
	bodies := make([][32]byte, len(rawIDs))
	for i := range rawIDs {
		if ids[i], err = oracle.ParseInt64(rawIDs[i]); err != nil {
			t.Fatal(err)
		}
		var body string
		if err := json.Unmarshal(rawBodies[i], &body); err != nil {
			t.Fatal(err)
		}
		bodies[i] = sha256.Sum256([]byte(body))
	}
	return ids, bodies
}

func newGen(t *testing.T, firstID int64) *synth.Generator {
	gen, err := synth.New(arrowSchema, uint64(firstID))
	if err != nil {
		t.Fatal(err)
	}
	gen.NextID, gen.StringBytes = firstID, 1000
	return gen
}
