package walraft

import (
	"bytes"
	"context"
	"reflect"
	"sync"
	"testing"
)

// TestConcurrentRunsIdenticalReplicas: many producers over several shards,
// seals interleaved and small generations, so replicas apply runs of
// appends split differently by their own commit timing. Every replica must
// still hold the same entries at the same positions, byte for byte, with
// the same generation boundaries.
func TestConcurrentRunsIdenticalReplicas(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.Engine.MaxGenerationBytes = 16 << 10 })
	ctx := context.Background()
	mustCreate(t, c.leader(), "t1", 4)
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				id := int64(p*1000 + i)
				rec := record(id, 1500)
				err := c.appendResolved(ctx, t, "t1", int(id%4), rec)
				rec.Release()
				if err != nil {
					t.Error(err)
					return
				}
				if i%13 == 12 {
					if _, err := c.leader().Seal(ctx, "t1", p%4); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}(p)
	}
	wg.Wait()
	c.waitApplied()
	// Boundaries, not seal times: a generation closed by size in the
	// middle of a run records that replica's run time (doc.go).
	type bound struct {
		First, Last uint64
		Bytes       int64
		Sealed      bool
	}
	boundaries := func(n *Node, shard int) []bound {
		gens, err := n.Generations(ctx, "t1", shard)
		if err != nil {
			t.Fatal(err)
		}
		var out []bound
		for _, g := range gens {
			out = append(out, bound{g.First, g.Last, g.Bytes, g.Sealed})
		}
		return out
	}
	for shard := 0; shard < 4; shard++ {
		wantIDs, wantRaw := dumpShard(t, c.node(0), shard)
		wantGens := boundaries(c.node(0), shard)
		if len(wantIDs) != 80 {
			t.Fatalf("shard %d holds %d entries, want 80", shard, len(wantIDs))
		}
		for i := 1; i < 3; i++ {
			ids, raw := dumpShard(t, c.node(i), shard)
			if !reflect.DeepEqual(ids, wantIDs) {
				t.Fatalf("shard %d: replica %s order differs", shard, c.node(i).ID())
			}
			for j := range raw {
				if !bytes.Equal(raw[j], wantRaw[j]) {
					t.Fatalf("shard %d entry %d differs on %s", shard, j+1, c.node(i).ID())
				}
			}
			if got := boundaries(c.node(i), shard); !reflect.DeepEqual(got, wantGens) {
				t.Fatalf("shard %d generations differ:\n%s %+v\nfirst %+v", shard, c.node(i).ID(), got, wantGens)
			}
		}
	}
}

func dumpShard(t *testing.T, n *Node, shard int) ([]int64, [][]byte) {
	t.Helper()
	return dump(t, n, "t1", shard)
}
