package walraft

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// addNode registers a fresh replica in the cluster without starting it.
func (c *cluster) addNode(name string) int {
	cfg, lb := baseConfig(c.t, name)
	if c.mod != nil {
		c.mod(&cfg)
	}
	cfg.Bootstrap = false
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfgs = append(c.cfgs, cfg)
	c.logs = append(c.logs, lb)
	c.nodes = append(c.nodes, nil)
	return len(c.nodes) - 1
}

var errKilled = errors.New("killed midway (test)")

// TestSnapshotInstallInterrupted: a new replica's snapshot install is cut
// midway (the receiver dies, then the sender); nothing half-installed is
// ever served, and after both restart the replica converges and serves
// byte-identical generations.
func TestSnapshotInstallInterrupted(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.TrailingLogs = 5
		cfg.Engine.MaxGenerationBytes = 64 << 10
	})
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 200, 2000)
	c.waitApplied()
	for i := range c.nodes {
		if err := c.node(i).Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	r := c.addNode("r3")
	n := c.start(r)
	hit := make(chan struct{})
	var once sync.Once
	hook := func(table string, pos uint64) error {
		if pos == 100 {
			once.Do(func() { close(hit) })
			return errKilled
		}
		return nil
	}
	n.fsm.onRestoreEntry.Store(&hook)
	sender := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	added := make(chan error, 1)
	go func() { added <- sender.AddReplica(ctx, "", n.PeerAddr()) }()
	select {
	case <-hit:
	case err := <-added:
		t.Fatalf("AddReplica returned before the install was cut: %v", err)
	}
	if _, err := n.Stats(context.Background(), "t1", nil); err == nil {
		t.Fatal("a replica in the middle of its install served a read")
	}
	c.stop(r)
	if _, err := os.Stat(filepath.Join(c.cfgs[r].Dir, restoreDir)); err != nil {
		t.Fatalf("the cut install left no partial directory to clean (%v): the test did not cut it", err)
	}
	for i := range c.nodes {
		if c.node(i) == sender {
			c.stop(i)
			defer c.start(i)
		}
	}
	if err := <-added; err == nil {
		t.Fatal("AddReplica succeeded although the install was cut")
	}
	c.start(r)
	if _, err := os.Stat(filepath.Join(c.cfgs[r].Dir, restoreDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial install still present after restart: %v", err)
	}
	l := c.leader()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	if err := l.AddReplica(ctx2, "", c.node(r).PeerAddr()); err != nil {
		t.Fatal(err)
	}
	fillTable(t, c, 200, 5, 2000)
	c.waitApplied()
	wantIDs, wantRaw := dump(t, l, "t1", 0)
	gotIDs, gotRaw := dump(t, c.node(r), "t1", 0)
	if !reflect.DeepEqual(gotIDs, wantIDs) || len(gotIDs) != 205 {
		t.Fatalf("replica holds %d entries, leader %d", len(gotIDs), len(wantIDs))
	}
	for i := range gotRaw {
		if !bytes.Equal(gotRaw[i], wantRaw[i]) {
			t.Fatalf("entry %d differs", i+1)
		}
	}
	if got, want := generations(t, c.node(r)), generations(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("generations differ:\nreplica %+v\nleader  %+v", got, want)
	}
}
