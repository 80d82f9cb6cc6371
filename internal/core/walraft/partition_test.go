package walraft

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestIsolatedOldLeaderCannotACK: the leader is cut off from its peers
// (its transport refuses and drops every connection) while it holds
// appends in flight and receives new ones. None is ACKed: the lease makes
// it step down and an entry commits only with a quorum. The other two
// elect a leader and continue; after healing, the old leader's unACKed
// entries are not in the log unless reported unknown.
func TestIsolatedOldLeaderCannotACK(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 10, 100)
	c.waitApplied()
	old := c.leader()
	old.stream.isolate(true)
	var results []error
	for i := int64(100); i < 110; i++ {
		rec := record(i, 100)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := old.Append(cctx, "t1", 0, rec)
		cancel()
		rec.Release()
		if err == nil {
			t.Fatalf("isolated old leader ACKed id %d", i)
		}
		results = append(results, err)
	}
	for _, err := range results {
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("isolated leader's append failed with %v, want not-leader or outcome unknown", err)
		}
	}
	if old.raft.State() == raft.Leader {
		t.Fatalf("isolated replica still claims leadership")
	}
	nl := c.otherLeader(old)
	rec := record(200, 100)
	if _, err := nl.Append(ctx, "t1", 0, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	old.stream.isolate(false)
	c.waitApplied()
	ids, _ := dump(t, old, "t1", 0)
	for _, id := range ids {
		if id >= 100 && id < 110 {
			for _, err := range results {
				if errors.Is(err, ErrOutcomeUnknown) {
					return // an unknown outcome may have landed; it was never ACKed
				}
			}
			t.Fatalf("id %d, refused before proposal, is in the log", id)
		}
	}
}

// TestWipedReplicaCannotVote: a replica's directory is wiped and it is
// restarted under the same name without the runbook. It gets a new id that
// is not in the configuration, so it neither votes nor counts toward a
// quorum: with the third replica also down, the leader cannot commit
// (nothing ACKed can be lost to the blank disk); once the third replica
// returns, every ACKed entry is there.
func TestWipedReplicaCannotVote(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 30, 100)
	c.waitApplied()
	want, _ := dump(t, c.leader(), "t1", 0)
	l := c.leader()
	var fs []int
	for i := range c.nodes {
		if c.node(i) != l {
			fs = append(fs, i)
		}
	}
	wiped, other := fs[0], fs[1]
	oldID := c.node(wiped).ID()
	c.stop(wiped)
	if err := os.RemoveAll(c.cfgs[wiped].Dir); err != nil {
		t.Fatal(err)
	}
	blank := c.start(wiped)
	if blank.ID() == oldID {
		t.Fatal("wiped replica reused its old id")
	}
	c.stop(other)
	rec := record(999, 10)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := l.Append(cctx, "t1", 0, rec)
	cancel()
	rec.Release()
	if err == nil {
		t.Fatal("a leader with one voter of three plus a blank replica ACKed an append")
	}
	if blank.raft.State() == raft.Leader || blank.raft.LastIndex() != 0 {
		t.Fatalf("blank replica: state %v, last index %d", blank.raft.State(), blank.raft.LastIndex())
	}
	if !strings.Contains(c.logs[wiped].String(), "peer expects replica "+oldID) {
		t.Fatalf("the blank replica's log does not say why it refused the leader:\n%s", c.logs[wiped].String())
	}
	if st := blank.Status(); st.CommitIndex != 0 {
		t.Fatalf("blank replica knows commit index %d", st.CommitIndex)
	}
	c.start(other)
	c.leader()
	deadline := time.Now().Add(30 * time.Second)
	for c.node(other).caughtUp() != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := dump(t, c.node(other), "t1", 0)
	if len(got) < len(want) {
		t.Fatalf("after the blank replica joined the fray, %d entries remain of %d ACKed", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: id %d, want %d", i+1, got[i], want[i])
		}
	}
}

// TestLaggingReplicaRefusesLinearizableReads: a follower cut off from the
// group has applied everything it knows committed, so its local reads
// pass the caught-up check while ACKed entries are missing from them —
// which is why a read that says what exists must be linearizable. Such a
// read is refused by the follower (not the leader) and by the cut-off
// leader (no quorum for its barrier); on the leader it sees every ACKed
// entry.
func TestLaggingReplicaRefusesLinearizableReads(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 10, 100)
	c.waitApplied()
	l := c.leader()
	var lag *Node
	for i := range c.nodes {
		if n := c.node(i); n != l {
			lag = n
			break
		}
	}
	lag.stream.isolate(true)
	fillTable(t, c, 10, 10, 100)
	if err := lag.caughtUp(); err != nil {
		t.Fatalf("the cut-off follower should pass the local check (it applied what it knows): %v", err)
	}
	if got, _ := dump(t, lag, "t1", 0); len(got) != 10 {
		t.Fatalf("cut-off follower serves %d entries locally, want the 10 it applied", len(got))
	}
	if err := lag.LinearizableRead(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower's linearizable read: %v, want ErrNotLeader", err)
	}
	if err := l.LinearizableRead(ctx); err != nil {
		t.Fatalf("leader's linearizable read: %v", err)
	}
	if got, _ := dump(t, l, "t1", 0); len(got) != 20 {
		t.Fatalf("leader after its barrier serves %d entries, want 20", len(got))
	}
	lag.stream.isolate(false)
	c.waitApplied()
	l = c.leader()
	l.stream.isolate(true)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := l.LinearizableRead(cctx)
	cancel()
	if err == nil {
		t.Fatal("a leader cut off from its group passed a linearizable read")
	}
	t.Logf("cut-off leader: %v", err)
}
