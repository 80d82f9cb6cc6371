package walreplica

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/powerfs"
)

// A replica applies committed appends to its engine without a sync: its
// raft log, fsynced before it acknowledges, is their durable copy. Here one
// replica's directory is on powerfs; it is SIGKILLed while producers run
// and the power is cut, which discards every write never fsynced — the
// test checks that the cut took part of the replica's engine files. The
// replica restarts on what survived, redoes the lost appends from its own
// raft log (its log says so), catches up, and then, with the two others
// stopped, serves every ACKed entry alone, byte-identical and once.
func TestReplicaLosesUnsyncedEngineTailToAPowerCut(t *testing.T) {
	c := newCluster(t)
	mnt := filepath.Join(c.dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	pfs, err := powerfs.Mount(mnt, filepath.Join(c.dir, "powerfs"))
	if err != nil {
		t.Fatalf("%v: the power-cut test needs /dev/fuse and root", err)
	}
	// Cleanups run last-in first-out: the replicas (registered later) are
	// killed before the unmount.
	t.Cleanup(func() {
		if err := pfs.Unmount(); err != nil {
			t.Error(err)
		}
	})
	const cut = "g1-r2"
	g := c.groupIn("g1", 3, func(name string) string {
		if name == cut {
			return filepath.Join(mnt, name)
		}
		return ""
	}, "--wal-generation-bytes", "256KiB")
	if r := c.run("create", "table", "create", "--table", "t", "--schema", writeSchema(t, c.dir), "--group", "g1"); r.Code != 0 {
		t.Fatalf("table create: %s", r)
	}
	victim := g.Replicas[2]
	log := c.router(20 * time.Second)
	l := newLedger()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { defer close(done); produce(context.Background(), t, log, "t", 0, 1, l, &stop) }()
	waitBytes(t, l, 2<<20)
	victim.Proc.Kill() // mid-stream: its engine's newest appends are unsynced
	waitBytes(t, l, 3<<20)
	stop.Store(true)
	<-done
	loss, err := pfs.PowerCut(powerfs.CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	engineLoss := 0
	for _, line := range loss.Lines(1000) {
		if strings.Contains(line, cut+"/wal/") {
			engineLoss++
		}
	}
	if engineLoss == 0 {
		t.Fatalf("the power cut discarded nothing of %s's engine (so nothing was redone); it discarded:\n%s", cut, loss)
	}
	t.Logf("the power cut discarded:\n%s", loss)
	victim.Start(t)
	waitCaughtUp(t, c, cut)
	if !strings.Contains(victim.Proc.Stderr(), "redone from the raft log beyond what the engine kept") {
		t.Fatalf("%s did not redo appends from its raft log after the cut; its log:\n%s", cut, victim.Proc.Stderr())
	}
	servesAlone(t, c, g, victim, l, "replica after a power cut, alone")
}

func waitBytes(t *testing.T, l *ledger, n int64) {
	t.Helper()
	for l.bytes.Load() < n && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCaughtUp waits until the replica has applied all the leader logged.
func waitCaughtUp(t *testing.T, c *cluster, name string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// Lag is measured against the leader's last index only when the
		// leader answered: without one it reads 0 and proves nothing.
		ms := members(t, c, "g1")
		leaderKnown := slices.ContainsFunc(ms, func(m walflight.Member) bool { return m.Leader && m.Error == "" })
		for _, m := range ms {
			if leaderKnown && m.Name == name && m.Error == "" && m.AppliedIndex > 0 && m.Lag == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not catch up: %+v", name, members(t, c, "g1"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
