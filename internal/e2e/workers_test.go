package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/testutil/proc"
)

// The seed's last step: two competing automatic workers (real `walctl worker
// run` processes with short slices) publish everything a producer ACKs while
// they run, each record exactly once, all columns intact, and both exit 0 on
// SIGTERM with their claims released.
func TestTwoCompetingWorkersPublishEverything(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	p := c.raceTwoWorkers("orders", 41, 12)
	p.exactlyOnce()
	p.allColumnsMatch()
	c.trimmedToWatermarks("orders")
}

// raceTwoWorkers creates table and runs two competing `worker run`
// processes with short slices while a producer seals gens generations;
// once all is published it stops both (SIGTERM, exit 0, claims released)
// and checks the claim changed hands. It returns the producer, whose ACKs
// the caller checks.
func (c *cluster) raceTwoWorkers(table string, seed uint64, gens int) *producer {
	t := c.t
	t.Helper()
	c.createTable(table)
	p := c.producer(table, seed)
	args := []string{"worker", "run", "--tables", table, "--poll-interval", "50ms", "--slice-rounds", "1", "--idle-release-rounds", "1"}
	// At most two generations a round, so they take several rounds (and
	// slices) however quickly they are sealed.
	env := []string{"WALCTL_PUBLICATION_MAX_GENERATIONS=2"}
	w1 := c.walctl("worker-1", env, args...)
	w2 := c.walctl("worker-2", env, args...)

	for i := 0; i < gens; i++ {
		p.generation(3, 40)
	}
	c.waitPublished(table)

	for _, w := range []*proc.Proc{w1, w2} {
		w.Signal(syscall.SIGTERM)
	}
	acquired := 0
	for _, w := range []*proc.Proc{w1, w2} {
		r := w.Wait()
		expect(t, w.Name+" on SIGTERM", r, 0)
		if !strings.Contains(r.Stderr, "every claim released") {
			t.Fatalf("%s did not report its claims released:\n%s", w.Name, r.Stderr)
		}
		n := strings.Count(r.Stderr, "claim acquired")
		t.Logf("%s acquired the claim %d times", w.Name, n)
		acquired += n
	}
	if acquired < 2 {
		t.Fatalf("the claim changed hands %d times; bounded slices should release it after every round", acquired)
	}
	return p
}

// waitPublished waits until every shard of table is trimmed through its last
// position: all sealed work is published and durable.
func (c *cluster) waitPublished(table string) {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		st, err := c.wal.Stats(c.ctx, table, nil)
		if err != nil {
			c.t.Fatal(err)
		}
		done := true
		for _, s := range st.Shards {
			done = done && s.TrimmedThrough == s.LastPosition
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("table %s not fully published within %s: %+v", table, waitTimeout, st.Shards)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
