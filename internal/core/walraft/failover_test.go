package walraft

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type acked struct {
	id  int64
	pos uint64
}

// produce runs producers that append ids through whichever replica leads
// until stop is closed; it returns the ACKed (id, position) pairs and the
// ids whose outcome was reported unknown.
func produce(c *cluster, producers int, stop <-chan struct{}) (acks []acked, unknown []int64, fatal error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := int64(p)*1_000_000 + i
				rec := record(id, 200)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				pos, err := c.appendRetry(ctx, "t1", 0, rec)
				cancel()
				rec.Release()
				mu.Lock()
				switch {
				case err == nil:
					acks = append(acks, acked{id, pos})
				case errors.Is(err, ErrOutcomeUnknown):
					unknown = append(unknown, id)
				default:
					fatal = err
				}
				mu.Unlock()
				if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
					return
				}
			}
		}(p)
	}
	wg.Wait()
	return acks, unknown, fatal
}

// checkDense asserts every ACKed id sits at its ACKed position, positions
// are dense, no id appears twice, and unknown ids appear at most once.
func checkDense(t *testing.T, n *Node, acks []acked, unknown []int64) {
	t.Helper()
	ids, _ := dump(t, n, "t1", 0)
	seen := map[int64]int{}
	for _, id := range ids {
		seen[id]++
		if seen[id] > 1 {
			t.Fatalf("id %d appears twice", id)
		}
	}
	for _, a := range acks {
		if a.pos == 0 || a.pos > uint64(len(ids)) || ids[a.pos-1] != a.id {
			t.Fatalf("ACKed id %d at position %d is missing (log holds %d entries)", a.id, a.pos, len(ids))
		}
	}
	known := map[int64]bool{}
	for _, a := range acks {
		known[a.id] = true
	}
	for _, u := range unknown {
		known[u] = true
	}
	for _, id := range ids {
		if !known[id] {
			t.Fatalf("id %d is in the log but was never proposed", id)
		}
	}
}

// TestLeaderShutdownMidStream: the leader stops while producers append;
// every ACKed entry survives at its position, positions stay dense, and the
// producers continue through the new leader.
func TestLeaderShutdownMidStream(t *testing.T) {
	c := newCluster(t, 3, nil)
	mustCreate(t, c.leader(), "t1", 1)
	stop := make(chan struct{})
	var acks []acked
	var unknown []int64
	var fatal error
	done := make(chan struct{})
	go func() {
		acks, unknown, fatal = produce(c, 4, stop)
		close(done)
	}()
	waitPositions(t, c, 100)
	old := c.leader()
	for i := range c.nodes {
		if c.node(i) == old {
			c.stop(i)
		}
	}
	newLeader := c.leader()
	before := newLeader.raft.LastIndex()
	waitIndex(t, newLeader, before+50)
	close(stop)
	<-done
	if fatal != nil {
		t.Fatal(fatal)
	}
	c.waitApplied()
	checkDense(t, newLeader, acks, unknown)
	t.Logf("%d ACKed, %d unknown (reported to the producer, not retried)", len(acks), len(unknown))
}

// TestRestartAppliesNothingTwice: all replicas stop and reopen on their
// directories; raft replays its log, the progress record skips what was
// applied, and every replica still holds each entry once.
func TestRestartAppliesNothingTwice(t *testing.T) {
	c := newCluster(t, 3, nil)
	mustCreate(t, c.leader(), "t1", 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	var acks []acked
	var unknown []int64
	go func() { acks, unknown, _ = produce(c, 3, stop); close(done) }()
	waitPositions(t, c, 60)
	close(stop)
	<-done
	c.waitApplied()
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	c.leader()
	rec := record(-1, 10)
	pos, err := c.appendRetry(context.Background(), "t1", 0, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied()
	for i := range c.nodes {
		checkDense(t, c.node(i), append(acks, acked{-1, pos}), unknown)
	}
	if want := uint64(len(acks) + 1); pos < want {
		t.Fatalf("append after restart at %d, want ≥ %d", pos, want)
	}
}

func waitPositions(t *testing.T, c *cluster, n uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := c.leader().Stats(context.Background(), "t1", nil); err == nil && st.Shards[0].LastPosition >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d positions appended", n)
}

func waitIndex(t *testing.T, n *Node, idx uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if n.raft.AppliedIndex() >= idx {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not reach index %d", n.ID(), idx)
}
