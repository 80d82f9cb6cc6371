package walraft

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/walctl/walctl/internal/core/wal"
)

// TestGroupAppendSealReadEpochTrim: every mutation goes through the log and
// every replica ends with identical positions, generation boundaries (seal
// times included), epochs, trims and entry bytes.
func TestGroupAppendSealReadEpochTrim(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	l := c.leader()
	mustCreate(t, l, "t1", 2)
	for i := int64(1); i <= 30; i++ {
		rec := record(i, 100)
		pos, err := l.Append(ctx, "t1", int(i%2), rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64((i + 1) / 2); pos != want {
			t.Fatalf("append %d: position %d, want %d", i, pos, want)
		}
		if i == 10 {
			if g, err := l.Seal(ctx, "t1", 0); err != nil || !g.Sealed || g.Last != 5 {
				t.Fatalf("seal: %+v %v", g, err)
			}
		}
	}
	if _, err := l.Seal(ctx, "t1", 0); err != nil {
		t.Fatal(err)
	}
	if e, err := l.AdvanceEpoch(ctx, "t1", 0); err != nil || e != 1 {
		t.Fatalf("advance: %d %v", e, err)
	}
	var ec *wal.EpochConflictError
	if _, err := l.AdvanceEpoch(ctx, "t1", 0); !errors.As(err, &ec) || ec.Current != 1 {
		t.Fatalf("stale advance: %v", err)
	}
	if _, err := l.Trim(ctx, "t1", 0, 5, 0); !errors.Is(err, wal.ErrStaleEpoch) {
		t.Fatalf("trim with a stale epoch: %v", err)
	}
	if tr, err := l.Trim(ctx, "t1", 0, 5, 1); err != nil || tr != 5 {
		t.Fatalf("trim: %d %v", tr, err)
	}
	c.waitApplied()

	var wantGens []wal.Generation
	var wantRaw [][]byte
	for i := range c.nodes {
		n := c.node(i)
		gens, err := n.Generations(ctx, "t1", 0)
		if err != nil {
			t.Fatal(err)
		}
		for j := range gens {
			gens[j].Path = ""
		}
		ids, raw := dump(t, n, "t1", 0)
		if len(ids) != 10 || ids[0] != 12 {
			t.Fatalf("replica %s shard 0 after trim: ids %v", n.ID(), ids)
		}
		if e, _ := n.Epoch(ctx, "t1"); e != 1 {
			t.Fatalf("replica %s epoch %d", n.ID(), e)
		}
		if i == 0 {
			wantGens, wantRaw = gens, raw
			continue
		}
		if !reflect.DeepEqual(gens, wantGens) {
			t.Fatalf("generations differ:\n%s: %+v\nleader: %+v", n.ID(), gens, wantGens)
		}
		for j := range raw {
			if !bytes.Equal(raw[j], wantRaw[j]) {
				t.Fatalf("replica %s entry %d differs", n.ID(), j)
			}
		}
	}
}

// TestFollowerRefusesMutationsBeforeProposal: a follower names the leader
// and proposes nothing.
func TestFollowerRefusesMutationsBeforeProposal(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	l := c.leader()
	mustCreate(t, l, "t1", 1)
	c.waitApplied()
	var f *Node
	for i := range c.nodes {
		if c.node(i) != l {
			f = c.node(i)
		}
	}
	before := l.raft.LastIndex()
	rec := record(1, 10)
	defer rec.Release()
	_, err := f.Append(ctx, "t1", 0, rec)
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) || !IsPreProposal(err) {
		t.Fatalf("append on a follower: %v", err)
	}
	if nl.LeaderID != l.ID() || nl.LeaderAddr != l.PeerAddr() {
		t.Fatalf("not-leader error names %s at %s, leader is %s at %s", nl.LeaderID, nl.LeaderAddr, l.ID(), l.PeerAddr())
	}
	if _, err := f.AdvanceEpoch(ctx, "t1", 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("advance on a follower: %v", err)
	}
	if _, err := f.Append(ctx, "created-later", 0, rec); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on a follower to a table it does not know: %v, want a redirect", err)
	}
	if after := l.raft.LastIndex(); after != before {
		t.Fatalf("refused mutations reached the log: last index %d → %d", before, after)
	}
	if _, err := l.Append(ctx, "nope", 0, rec); !errors.Is(err, wal.ErrUnknownTable) {
		t.Fatalf("append to an unknown table: %v", err)
	}
	if _, err := l.Append(ctx, "t1", 1, rec); !errors.Is(err, wal.ErrBadShard) {
		t.Fatalf("append to a shard out of range: %v", err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	b.Field(0).(*array.Int32Builder).Append(1)
	bad := b.NewRecordBatch()
	b.Release()
	defer bad.Release()
	if _, err := l.Append(ctx, "t1", 0, bad); !errors.Is(err, wal.ErrSchemaMismatch) {
		t.Fatalf("append of another schema: %v", err)
	}
	if after := l.raft.LastIndex(); after != before {
		t.Fatalf("refused appends reached the log: last index %d → %d", before, after)
	}
}
