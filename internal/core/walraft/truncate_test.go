package walraft

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReopenAfterLogSuffixCleared: a deposed leader's uncommitted tail is
// cleared by the new leader (raft "clearing log suffix"), then that
// replica is closed and reopened on its directory: it must open and catch
// up. With hashicorp/raft-wal v0.4.0 as the log store the reopen panicked
// ("sealed segment has no index block", raft-wal issue #31).
func TestReopenAfterLogSuffixCleared(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 10, 100)
	c.waitApplied()
	old := c.leader()
	oi := -1
	for i := range c.nodes {
		if c.node(i) == old {
			oi = i
		}
	}
	committed := old.raft.LastIndex()
	old.stream.isolate(true)
	var wg sync.WaitGroup
	for i := int64(100); i < 105; i++ {
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			rec := record(id, 100)
			defer rec.Release()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := old.Append(cctx, "t1", 0, rec); err == nil {
				t.Errorf("isolated leader ACKed id %d", id)
			}
		}(i)
	}
	wg.Wait()
	if got := old.raft.LastIndex(); got <= committed {
		t.Fatalf("the isolated leader logged nothing locally (last index %d, committed %d): no suffix to clear", got, committed)
	}
	c.otherLeader(old)
	fillTable(t, c, 200, 5, 100)
	old.stream.isolate(false)
	c.waitApplied()
	if !strings.Contains(c.logs[oi].String(), "clearing log suffix") {
		t.Fatalf("the old leader's tail was never cleared:\n%s", c.logs[oi].String())
	}
	c.stop(oi)
	reopened := c.start(oi)
	fillTable(t, c, 300, 5, 100)
	c.waitApplied()
	want, _ := dump(t, c.leader(), "t1", 0)
	got, _ := dump(t, reopened, "t1", 0)
	if len(got) != len(want) {
		t.Fatalf("reopened replica has %d entries, leader %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: id %d on the reopened replica, %d on the leader", i+1, got[i], want[i])
		}
	}
}
