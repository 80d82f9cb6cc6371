package walraft

import (
	"context"
	"reflect"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestOnlyLeaderSealsByAge: age sealing is decided by the leader on its
// clock and goes through the log, so every replica seals the same
// generation at the same recorded time; followers never seal on their own.
func TestOnlyLeaderSealsByAge(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Clock = clk
		cfg.Engine.MaxGenerationAge = time.Second
	})
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 3, 100)
	c.waitApplied()
	for i := range c.nodes {
		if g := generations(t, c.node(i)); len(g) != 1 || g[0].Sealed {
			t.Fatalf("replica %s sealed before the clock moved: %+v", c.node(i).ID(), g)
		}
	}
	var sealedAt time.Time
	deadline := time.Now().Add(30 * time.Second)
	for sealedAt.IsZero() && time.Now().Before(deadline) {
		clk.Step(300 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if g := generations(t, c.leader()); g[0].Sealed {
			sealedAt = g[0].SealedAt
		}
	}
	if sealedAt.IsZero() {
		t.Fatal("the leader never sealed the aged generation")
	}
	if sealedAt.Before(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)) {
		t.Fatalf("sealed at %v, before the generation was a second old on the leader's clock", sealedAt)
	}
	c.waitApplied()
	want := generations(t, c.leader())
	for i := range c.nodes {
		if got := generations(t, c.node(i)); !reflect.DeepEqual(got, want) {
			t.Fatalf("replica %s: %+v, leader %+v", c.node(i).ID(), got, want)
		}
	}
	if st, _ := c.leader().Stats(context.Background(), "t1", nil); st.Shards[0].SealedGenerations != 1 {
		t.Fatalf("stats: %+v", st.Shards[0])
	}
}
