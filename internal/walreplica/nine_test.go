package walreplica

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/walctl/walctl/internal/core/placement"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// router is a producer's view of every group: placement from etcd, as
// walctl's own commands find it.
func (c *cluster) router(timeout time.Duration) *walflight.Router {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.etcd.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	r := walflight.NewRouter(c.groupsConfig(), placement.New(cli, "/walctl/v1", timeout), c.clientOptions(timeout))
	c.t.Cleanup(func() { r.Close() })
	return r
}

func leaderOf(t *testing.T, c *cluster, g *proc.WALGroup) *proc.WALReplica {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, m := range members(t, c, g.Name) {
			for _, rep := range g.Replicas {
				if m.Leader && m.Name == rep.Name {
					return rep
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s has no leader", g.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nine starts three TLS groups of three replicas and places table a in g1
// and b in g2 (two shards each).
func nine(t *testing.T) (*cluster, []*proc.WALGroup) {
	c := newCluster(t)
	var gs []*proc.WALGroup
	for _, name := range []string{"g1", "g2", "g3"} {
		gs = append(gs, c.group(name, 3, "--wal-generation-bytes", "1MiB"))
	}
	schema := writeSchema(t, c.dir)
	for tbl, g := range map[string]string{"a": "g1", "b": "g2"} {
		if r := c.run("create-"+tbl, "table", "create", "--table", tbl, "--schema", schema, "--shards", "2", "--group", g); r.Code != 0 {
			t.Fatalf("table create %s: %s", tbl, r)
		}
	}
	return c, gs
}

// producers runs one producer per shard of tables a and b until stop() is
// called; midway (at half of size) it calls midway once.
func producers(t *testing.T, log *walflight.Router, size int64, midway func()) map[string]*ledger {
	ctx := context.Background()
	ledgers := map[string]*ledger{"a": newLedger(), "b": newLedger()}
	var stop atomic.Bool
	var wg sync.WaitGroup
	first := int64(1)
	for _, tbl := range []string{"a", "b"} {
		for shard := 0; shard < 2; shard++ {
			wg.Add(1)
			go func(tbl string, shard int, firstID int64) {
				defer wg.Done()
				produce(ctx, t, log, tbl, shard, firstID, ledgers[tbl], &stop)
			}(tbl, shard, first)
			first += 1 << 40
		}
	}
	defer func() { stop.Store(true); wg.Wait() }()
	total := func() int64 { return ledgers["a"].bytes.Load() + ledgers["b"].bytes.Load() }
	waitFor := func(what string, cond func() bool) bool {
		deadline := time.Now().Add(10 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) || t.Failed() {
				t.Errorf("waiting for %s", what)
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
		return true
	}
	if !waitFor("half the payload", func() bool { return total() >= size/2 }) {
		return nil
	}
	before := ledgers["a"].ackCount.Load()
	midway()
	if !waitFor("the rest of the payload", func() bool { return total() >= size && ledgers["a"].ackCount.Load() > before+10 }) {
		return nil
	}
	t.Logf("ACKed %d MiB; a: %d appends (%d before midway, %d ids unknown), b: %d appends", total()>>20,
		ledgers["a"].ackCount.Load(), before, len(ledgers["a"].unknown), ledgers["b"].ackCount.Load())
	return ledgers
}

// checkWAL reads both tables back through the groups: dense positions,
// every ACKed record once with its payload, unknown outcomes at most once.
func checkWAL(t *testing.T, log *walflight.Router, ledgers map[string]*ledger) {
	for tbl, l := range ledgers {
		ids, bodies := walIDs(context.Background(), t, log, tbl, 2)
		l.check(t, "WAL of "+tbl, ids, bodies)
	}
}

// publishAndCheck seals, publishes and checks both tables with the
// official reader and walctl verify.
func publishAndCheck(t *testing.T, c *cluster, log *walflight.Router, ledgers map[string]*ledger) {
	ctx := context.Background()
	for tbl, l := range ledgers {
		for s := 0; s < 2; s++ {
			if _, err := log.Seal(ctx, tbl, s); err != nil {
				t.Fatalf("seal %s/%d: %v", tbl, s, err)
			}
		}
		publishAll(t, c, tbl)
		ids, bodies := oracleIDs(ctx, t, filepath.Join(c.dir, "data", "tables", tbl+".lance"))
		l.check(t, "official reader, table "+tbl, ids, bodies)
		r := c.run("verify-"+tbl, "verify", "--table", tbl, "--output", "json")
		if r.Code != 0 || !strings.Contains(r.Stdout, `"ok": true`) {
			t.Fatalf("verify %s: %s", tbl, r)
		}
	}
}

// Nine replicas (three groups of three, mutual TLS), two tables in two
// groups written concurrently; g1's leader is SIGKILLed mid-stream: every
// ACKed entry survives, producers go on through the new leader (appends
// in flight on the dead leader are reported unknown, never retried),
// positions stay dense; the killed leader rejoins on its own directory;
// then both tables are published and the official reader and walctl verify find every ACKed
// record exactly once with its payload.
func TestNineReplicasLeaderKilledMidStream(t *testing.T) {
	c, gs := nine(t)
	log := c.router(20 * time.Second)
	var old *proc.WALReplica
	ledgers := producers(t, log, replicaBytes(t), func() {
		old = leaderOf(t, c, gs[0])
		old.Proc.Kill()
		t.Logf("SIGKILLed g1's leader %s", old.Name)
	})
	if ledgers == nil || t.Failed() {
		t.FailNow()
	}
	old.Start(t)
	t.Logf("restarted %s", old.Name)
	checkWAL(t, log, ledgers)
	publishAndCheck(t, c, log, ledgers)
}

// publishAll publishes every sealed generation of table, retrying while the
// groups elect leaders after the restart (exit 5).
func publishAll(t *testing.T, c *cluster, table string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		r := c.run("publish-"+table, "publish", "--table", table, "--all", "--output", "json")
		if r.Code == 0 {
			return
		}
		if r.Code != 5 || time.Now().After(deadline) {
			t.Fatalf("publish %s: %s", table, r)
		}
		time.Sleep(time.Second)
	}
}

// All nine replicas SIGKILLed while everything ACKed is unpublished, then
// restarted on their original directories: both tables publish every
// ACKed record exactly once with its payload (official reader, walctl
// verify), with no producer replay.
func TestNineReplicasAllKilledThenPublished(t *testing.T) {
	c, gs := nine(t)
	log := c.router(20 * time.Second)
	ledgers := producers(t, log, replicaBytes(t), func() {})
	if ledgers == nil || t.Failed() {
		t.FailNow()
	}
	for _, g := range gs {
		for _, rep := range g.Replicas {
			rep.Proc.Kill()
		}
	}
	for _, g := range gs {
		for _, rep := range g.Replicas {
			rep.Start(t)
		}
	}
	checkWAL(t, log, ledgers)
	publishAndCheck(t, c, log, ledgers)
}
