package walraft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/wal"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: arrow.BinaryTypes.String},
}, nil)

// record builds one row with id and a payload of size bytes derived from id.
func record(id int64, size int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(id)
	b.Field(1).(*array.StringBuilder).Append(strings.Repeat(string(rune('a'+id%26)), size))
	return b.NewRecordBatch()
}

func recordID(rec arrow.RecordBatch) int64 { return rec.Column(0).(*array.Int64).Value(0) }

// logBuf collects a node's log lines for assertions.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cluster is a group of in-process replicas on loopback TCP and real dirs.
type cluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes []*Node
	cfgs  []Config
	logs  []*logBuf
	mod   func(*Config)
}

func baseConfig(t testing.TB, name string) (Config, *logBuf) {
	lb := &logBuf{}
	return Config{
		Dir: filepath.Join(t.TempDir(), name), Group: "g1", Name: name, PeerAddr: "127.0.0.1:0",
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		Engine: wal.Options{MaxGenerationBytes: 1 << 20, MaxGenerationAge: -1},
		Logger: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}, lb
}

// newCluster bootstraps replica 0 and adds n-1 fresh replicas through
// AddReplica, as an operator would.
func newCluster(t testing.TB, n int, mod func(*Config)) *cluster {
	c := &cluster{t: t, mod: mod}
	for i := 0; i < n; i++ {
		cfg, lb := baseConfig(t, fmt.Sprintf("r%d", i))
		cfg.Bootstrap = i == 0
		if mod != nil {
			mod(&cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		c.logs = append(c.logs, lb)
		c.nodes = append(c.nodes, nil)
		c.start(i)
		if i == 0 {
			c.leader()
			continue
		}
		c.addReplica(i)
	}
	t.Cleanup(c.closeAll)
	t.Cleanup(c.saveLogs)
	return c
}

// saveLogs writes every replica's log to $WALRAFT_TEST_LOGS/<test>/ when
// the test failed (for diagnosis).
func (c *cluster) saveLogs() {
	dir := os.Getenv("WALRAFT_TEST_LOGS")
	if dir == "" || !c.t.Failed() {
		return
	}
	dir = filepath.Join(dir, c.t.Name())
	os.MkdirAll(dir, 0o755)
	for i, lb := range c.logs {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%d.log", i)), []byte(lb.String()), 0o644)
	}
}

func (c *cluster) addReplica(i int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.leader().AddReplica(ctx, "", c.node(i).PeerAddr()); err != nil {
		c.t.Fatalf("add replica %d: %v", i, err)
	}
}

// start opens replica i on its directory and address.
func (c *cluster) start(i int) *Node {
	c.t.Helper()
	n, err := Open(context.Background(), c.cfgs[i])
	if err != nil {
		c.t.Fatalf("open replica %d: %v", i, err)
	}
	c.cfgs[i].PeerAddr = n.PeerAddr() // keep the port across restarts
	c.cfgs[i].Bootstrap = false
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
	return n
}

func (c *cluster) node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

func (c *cluster) stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		if err := n.Close(); err != nil {
			c.t.Logf("close replica %d: %v", i, err)
		}
	}
}

func (c *cluster) closeAll() {
	for i := range c.nodes {
		c.stop(i)
	}
}

// leader waits for a running replica to be leader (a failsafe deadline,
// not a timing assertion).
func (c *cluster) leader() *Node {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, n := range c.nodes {
			if n != nil && n.raft.State() == raft.Leader {
				c.mu.Unlock()
				return n
			}
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no leader elected")
	return nil
}

// otherLeader waits for a running replica other than old to lead (a
// failsafe deadline, not a timing assertion).
func (c *cluster) otherLeader(old *Node) *Node {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i := range c.nodes {
			if n := c.node(i); n != nil && n != old && n.raft.State() == raft.Leader {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("the other replicas elected no leader")
	return nil
}

// leaderOrNil returns the running replica that leads, if any.
func (c *cluster) leaderOrNil() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n != nil && n.raft.State() == raft.Leader {
			return n
		}
	}
	return nil
}

// waitApplied waits until every running replica knows the leader's last
// index committed and has applied every command up to it.
func (c *cluster) waitApplied() {
	c.t.Helper()
	target := c.leader().raft.LastIndex()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		c.mu.Lock()
		for _, n := range c.nodes {
			if n != nil && (n.raft.CommitIndex() < target || n.caughtUp() != nil) {
				ok = false
			}
		}
		c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("replicas did not apply index %d", target)
}

// appendRetry appends through whichever replica leads, retrying only
// errors that prove the entry was never proposed. ErrOutcomeUnknown is
// returned, not retried.
func (c *cluster) appendRetry(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	for {
		var n *Node
		c.mu.Lock()
		for _, x := range c.nodes {
			if x != nil && x.raft.State() == raft.Leader {
				n = x
			}
		}
		c.mu.Unlock()
		if n != nil {
			pos, err := n.Append(ctx, table, shard, rec)
			if err == nil || !IsPreProposal(err) {
				return pos, err
			}
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// appendResolved appends rec (one record whose id is unique in the shard)
// as a producer should: an unknown outcome (a leader lost mid-commit, as
// happens on a loaded machine) is resolved by a linearizable read of the
// shard through the next leader, and the append is sent again only if its
// id is not there.
func (c *cluster) appendResolved(ctx context.Context, t *testing.T, table string, shard int, rec arrow.RecordBatch) error {
	t.Helper()
	for {
		_, err := c.appendRetry(ctx, table, shard, rec)
		if !errors.Is(err, ErrOutcomeUnknown) {
			return err
		}
		t.Logf("append of id %d: %v; reading back", recordID(rec), err)
		for {
			l := c.leader()
			if err := l.LinearizableRead(ctx); err != nil {
				time.Sleep(20 * time.Millisecond) // the next leader answers
				continue
			}
			ids, _ := dump(t, l, table, shard)
			if slices.Contains(ids, recordID(rec)) {
				return nil
			}
			break
		}
	}
}

// dump reads every entry of a shard from n: position → id and raw bytes.
func dump(t *testing.T, n *Node, table string, shard int) (ids []int64, raw [][]byte) {
	t.Helper()
	ctx := context.Background()
	st, err := n.Stats(ctx, table, nil)
	if err != nil {
		t.Fatalf("stats on %s: %v", n.ID(), err)
	}
	ss := st.Shards[shard]
	if ss.LastPosition == ss.TrimmedThrough {
		return nil, nil
	}
	err = n.Read(ctx, table, shard, ss.TrimmedThrough+1, ss.LastPosition, func(e wal.Entry) error {
		ids = append(ids, recordID(e.Record))
		raw = append(raw, bytes.Clone(e.Raw))
		return nil
	})
	if err != nil {
		t.Fatalf("read on %s: %v", n.ID(), err)
	}
	return ids, raw
}

func mustCreate(t *testing.T, n *Node, table string, shards int) {
	t.Helper()
	if _, err := n.CreateTable(context.Background(), table, testSchema, shards); err != nil {
		t.Fatal(err)
	}
}

func wipe(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}
