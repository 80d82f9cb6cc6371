package walreplica

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// oneGroup starts g1 (three TLS replicas) with table t (one shard) placed
// in it, and ACKs about size bytes into it; the ledger says what.
func oneGroup(t *testing.T, size int64) (*cluster, *proc.WALGroup, *walflight.Router, *ledger) {
	c := newCluster(t)
	g := c.group("g1", 3, "--wal-generation-bytes", "256KiB")
	if r := c.run("create", "table", "create", "--table", "t", "--schema", writeSchema(t, c.dir), "--group", "g1"); r.Code != 0 {
		t.Fatalf("table create: %s", r)
	}
	log := c.router(20 * time.Second)
	l := newLedger()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { defer close(done); produce(context.Background(), t, log, "t", 0, 1, l, &stop) }()
	for l.bytes.Load() < size && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	<-done
	if _, err := log.Seal(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	return c, g, log, l
}

func memberIDs(t *testing.T, c *cluster, name string) (voters, others []string) {
	for _, m := range members(t, c, "g1") {
		if m.Name != name {
			continue
		}
		if m.Voter {
			voters = append(voters, m.ID)
		} else {
			others = append(others, m.ID)
		}
	}
	return voters, others
}

// A replica's directory replaced by an empty one: restarted without the
// runbook it is not a member (no vote, no lead); the runbook (remove the
// old id, add-replica) rebuilds it; then with the two others stopped the
// group's whole payload is fetched from it alone, byte-identical.
func TestWipedReplicaRebuiltThenServesTheGroupAlone(t *testing.T) {
	c, g, _, l := oneGroup(t, 2<<20)
	wiped := g.Replicas[2]
	oldVoters, _ := memberIDs(t, c, wiped.Name)
	if len(oldVoters) != 1 {
		t.Fatalf("%s: voters %v", wiped.Name, oldVoters)
	}
	wiped.Wipe(t)
	wiped.Start(t)
	voters, others := memberIDs(t, c, wiped.Name)
	if len(voters) != 1 || voters[0] != oldVoters[0] || len(others) != 0 {
		t.Fatalf("after the wipe, %s: voters %v, non-voters %v; want only the old id %s (the blank disk is no member)", wiped.Name, voters, others, oldVoters[0])
	}
	if r := c.run("remove", "wal", "remove-replica", "--group", "g1", "--id", oldVoters[0]); r.Code != 0 {
		t.Fatalf("remove-replica: %s", r)
	}
	if r := c.run("add", "wal", "add-replica", "--group", "g1", "--peer", wiped.PeerAddr); r.Code != 0 {
		t.Fatalf("add-replica: %s", r)
	}
	voters, _ = memberIDs(t, c, wiped.Name)
	if len(voters) != 1 || voters[0] == oldVoters[0] {
		t.Fatalf("after add-replica, %s voters %v; want one new id", wiped.Name, voters)
	}
	servesAlone(t, c, g, wiped, l, "rebuilt replica alone")
}

// servesAlone stops every replica of g but rep, then checks that rep alone
// serves table t (one shard) as the ledger says: every ACKed id once,
// byte-identical.
func servesAlone(t *testing.T, c *cluster, g *proc.WALGroup, rep *proc.WALReplica, l *ledger, where string) {
	t.Helper()
	for _, other := range g.Replicas {
		if other != rep {
			other.Proc.Kill()
		}
	}
	alone, err := walflight.Dial(context.Background(), rep.Addr, c.clientOptions(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	// Alone, the replica can still apply what it already knows committed;
	// until it has, its reads are refused loudly (never partial), so wait
	// out that refusal only.
	deadline := time.Now().Add(time.Minute)
	for {
		ids, bodies, err := readIDs(context.Background(), t, alone, "t", 1)
		if err == nil {
			l.check(t, where, ids, bodies)
			return
		}
		if !strings.Contains(err.Error(), "has not caught up") || time.Now().After(deadline) {
			t.Fatalf("%s: %v", where, err)
		}
		t.Logf("%s: refused while applying: %v", where, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// A leader SIGSTOPped until another is elected, then resumed, cannot ACK
// the append it received while stopped; the producers' ACKed records stay
// dense and once.
func TestStoppedOldLeaderCannotACK(t *testing.T) {
	c, g, log, l := oneGroup(t, 1<<20)
	old := leaderOf(t, c, g)
	// One connection, established now: the append below reaches the
	// stopped process's socket and waits there for it to resume.
	opts := c.clientOptions(2 * time.Minute)
	opts.Conns = 1
	direct, err := walflight.Dial(context.Background(), old.Addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	old.Proc.Stop()
	late := make(chan error, 1)
	go func() {
		gen := newGen(t, 1<<50)
		b := gen.Batch(4)
		defer b.Release()
		pos, err := direct.Append(context.Background(), "t", 0, b)
		if err == nil {
			err = errors.New("ACKed at position " + itoa(int(pos)))
		}
		late <- err
	}()
	var stop atomic.Bool
	done := make(chan struct{})
	before := l.ackCount.Load()
	go func() { defer close(done); produce(context.Background(), t, log, "t", 0, 1<<45, l, &stop) }()
	deadline := time.Now().Add(3 * time.Minute)
	for l.ackCount.Load() < before+10 && !t.Failed() {
		if time.Now().After(deadline) {
			stop.Store(true)
			<-done
			old.Proc.Cont()
			t.Fatalf("no append ACKed by the other replicas while the leader was stopped (%d unknown ids)", len(l.unknown))
		}
		time.Sleep(20 * time.Millisecond) // the others elect a leader and ACK
	}
	stop.Store(true)
	<-done
	old.Proc.Cont()
	if err := <-late; err == nil || strings.HasPrefix(err.Error(), "ACKed") {
		t.Fatalf("the resumed old leader answered the append it got while stopped: %v", err)
	} else {
		t.Logf("resumed old leader refused: %v", err)
	}
	ids, bodies := walIDs(context.Background(), t, log, "t", 1)
	for _, id := range ids {
		if id >= 1<<50 {
			t.Fatalf("the append sent to the stopped leader is in the WAL (id %d)", id)
		}
	}
	l.check(t, "WAL after the resumed leader", ids, bodies)
}

// Bad input: an unknown group (exit 2, named), a group with no reachable
// quorum (exit 5 within --command-timeout naming the members tried), a
// replica of another group offered to add-replica (refused, exit 2).
func TestBadGroupInput(t *testing.T) {
	c, g, _, _ := oneGroup(t, 64<<10)
	r := c.run("unknown", "table", "create", "--table", "u", "--schema", writeSchema(t, c.dir), "--group", "g9")
	if r.Code != 2 || !strings.Contains(r.Stderr, `"g9"`) {
		t.Fatalf("unknown group: %s", r)
	}
	other := c.procs.StartWALGroup(t, "gx", 1, proc.WALGroupOptions{CAFile: c.ca.CertFile, Cert: func(n string) (string, string) {
		p, err := c.ca.Issue(n)
		if err != nil {
			t.Fatal(err)
		}
		return p.CertFile, p.KeyFile
	}})
	r = c.run("mismatch", "wal", "add-replica", "--group", "g1", "--peer", other.Replicas[0].PeerAddr)
	if r.Code != 2 || !strings.Contains(r.Stderr, "gx") {
		t.Fatalf("add-replica of a replica of group gx into g1: %s; want exit 2 naming gx", r)
	}
	// The leader and one follower die: the survivor knows no leader.
	leader := leaderOf(t, c, g)
	leader.Proc.Kill()
	for _, rep := range g.Replicas {
		if rep != leader {
			rep.Proc.Kill()
			break
		}
	}
	start := time.Now()
	r = c.procs.Run(t, "no-quorum", append(c.env(), "WALCTL_COMMAND_TIMEOUT=3s"), "wal", "seal", "--table", "t")
	t.Logf("no quorum: exit %d after %s", r.Code, time.Since(start).Round(time.Millisecond))
	if r.Code != 5 {
		t.Fatalf("seal with no quorum: %s; want exit 5", r)
	}
	for _, rep := range g.Replicas {
		if !strings.Contains(r.Stderr, rep.Addr) {
			t.Errorf("the no-quorum error does not name %s: %s", rep.Addr, r.Stderr)
		}
	}
}

var _ wal.Log = (*walflight.Client)(nil)
