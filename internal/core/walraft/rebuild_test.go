package walraft

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/wal"
)

// fill appends n entries of size bytes to t1 shard 0 through the leader,
// sealing every 40 entries.
func fillTable(t *testing.T, c *cluster, from, n int64, size int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		rec := record(i, size)
		err := c.appendResolved(ctx, t, "t1", 0, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if i%40 == 39 {
			if _, err := c.leader().Seal(ctx, "t1", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func generations(t *testing.T, n *Node) []wal.Generation {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.caughtUp() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // a command committed a moment ago
	}
	gens, err := n.Generations(context.Background(), "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gens {
		gens[i].Path = ""
		gens[i].SealedAt = time.Unix(0, gens[i].SealedAt.UnixNano()).UTC()
	}
	return gens
}

func followerIndex(c *cluster) int {
	l := c.leader()
	for i := range c.nodes {
		if n := c.node(i); n != nil && n != l {
			return i
		}
	}
	return -1
}

// TestRebuildFromEmptyDirectory: a replica's directory is replaced by an
// empty one; restarted under the same name it gets a new id, serves nothing
// before it is added (reads fail loudly), is rebuilt through AddReplica from
// a snapshot plus the log, and then serves the group's whole payload alone,
// byte-identical, with the other two replicas stopped.
func TestRebuildFromEmptyDirectory(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.TrailingLogs = 5
		cfg.Engine.MaxGenerationBytes = 64 << 10
	})
	ctx := context.Background()
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 200, 2000)
	l := c.leader()
	if _, err := l.AdvanceEpoch(ctx, "t1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Trim(ctx, "t1", 0, 40, 1); err != nil {
		t.Fatal(err)
	}
	fillTable(t, c, 200, 20, 2000)
	c.waitApplied()
	for i := range c.nodes {
		if err := c.node(i).Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
	}

	v := followerIndex(c)
	oldID := c.node(v).ID()
	c.stop(v)
	wipe(t, c.cfgs[v].Dir)
	n := c.start(v)
	if n.ID() == oldID {
		t.Fatalf("wiped replica kept its id %s", oldID)
	}
	if _, err := n.Stats(ctx, "t1", nil); !errors.Is(err, ErrBehind) {
		t.Fatalf("read on a replica that has not joined: %v, want ErrBehind", err)
	}
	l = c.leader()
	if err := l.AddReplica(ctx, "", n.PeerAddr()); !errors.Is(err, ErrAddressInUse) {
		t.Fatalf("adding a wiped replica while its old id holds the address: %v", err)
	}
	if err := l.RemoveReplica(ctx, oldID); err != nil {
		t.Fatal(err)
	}
	if err := l.AddReplica(ctx, "", n.PeerAddr()); err != nil {
		t.Fatal(err)
	}
	fillTable(t, c, 220, 10, 2000)
	c.waitApplied()
	members, err := l.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.ID == oldID || (m.ID == n.ID() && !m.Voter) || m.Error != "" {
			t.Fatalf("members after rebuild: %+v", members)
		}
	}
	if !bytes.Contains([]byte(c.logs[v].String()), []byte("walraft: snapshot installed")) {
		t.Fatalf("the rebuilt replica did not install a snapshot (log compacted to 5 trailing entries):\n%s", c.logs[v].String())
	}
	wantIDs, wantRaw := dump(t, l, "t1", 0)
	wantGens := generations(t, l)
	for i := range c.nodes {
		if i != v {
			c.stop(i)
		}
	}
	gotIDs, gotRaw := dump(t, n, "t1", 0)
	if !reflect.DeepEqual(gotIDs, wantIDs) || len(gotIDs) != 190 {
		t.Fatalf("rebuilt replica holds %d entries, leader had %d", len(gotIDs), len(wantIDs))
	}
	for i := range gotRaw {
		if !bytes.Equal(gotRaw[i], wantRaw[i]) {
			t.Fatalf("entry %d differs", i)
		}
	}
	if got := generations(t, n); !reflect.DeepEqual(got, wantGens) {
		t.Fatalf("generations differ:\nrebuilt %+v\nleader  %+v", got, wantGens)
	}
}
