package walraft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/wal"
)

const (
	raftDir = "raft"
	snapDir = "snapshots"
	// logCacheEntries is how many of the newest raft entries are kept in
	// memory for replication to followers.
	logCacheEntries = 64
)

// oldRaftLogs are the files of the raft log stores before the segment
// store: raft-wal's metadata and the bbolt file. Either refuses the
// directory (ErrOldRaftLog).
var oldRaftLogs = []string{"wal-meta.db", "raft.db"}

// Node is one replica of a WAL group. It satisfies wal.Log: mutations go
// through the group's raft log (leader only), reads are served from this
// replica's applied state.
type Node struct {
	cfg   Config
	ident identity
	log   *slog.Logger

	fsm    *fsm
	raft   *raft.Raft
	store  *segStore     // raft log and stable state
	logs   raft.LogStore // store behind a cache of recent entries
	snaps  *raft.FileSnapshotStore
	stream *streamLayer
	trans  *raft.NetworkTransport

	// checked is a commit index up to which caughtUp found no command
	// beyond the FSM's progress.
	checked atomic.Uint64

	stop      chan struct{}
	sealDone  chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ wal.Log = (*Node)(nil)

// Open starts a replica on cfg.Dir. An empty directory gets a new identity
// and, unless cfg.Bootstrap, waits to be added to a group by its leader
// (AddReplica): it never starts an election or votes before that. With
// cfg.Bootstrap on an empty directory it creates a one-voter group. A
// snapshot install interrupted by a crash is redone before raft starts.
// Failures name the directory or address; ctx bounds nothing beyond Open.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	id, fresh, err := loadIdentity(cfg.Dir, cfg.Group, cfg.Name)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("group", cfg.Group, "replica", id.ID)
	n := &Node{cfg: cfg, ident: id, log: log, stop: make(chan struct{}), sealDone: make(chan struct{})}
	if err := n.openStores(); err != nil {
		n.closeStores()
		return nil, err
	}
	if err := n.startRaft(); err != nil {
		n.closeStores()
		return nil, err
	}
	go n.ageSealer()
	log.Info("walraft: replica started", "peer_addr", n.PeerAddr(), "fresh", fresh, "bootstrap", cfg.Bootstrap)
	return n, nil
}

func (n *Node) openStores() error {
	var err error
	if n.fsm, err = openFSM(n.cfg.Dir, n.cfg.Engine, n.log); err != nil {
		return err
	}
	rd := filepath.Join(n.cfg.Dir, raftDir)
	if err := durable.MkdirAll(rd, 0o755); err != nil {
		return err
	}
	for _, old := range oldRaftLogs {
		if _, err := os.Stat(filepath.Join(rd, old)); err == nil {
			return fmt.Errorf("%s (%s): %w", rd, old, ErrOldRaftLog)
		}
	}
	if n.store, err = openSegStore(rd); err != nil {
		return err
	}
	// Followers are fed from the newest entries: keep them in memory.
	if n.logs, err = raft.NewLogCache(logCacheEntries, n.store); err != nil {
		return err
	}
	if err := n.fsm.resolveRun(n.store); err != nil {
		return err
	}
	sd := filepath.Join(n.cfg.Dir, snapDir)
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(sd, 2, newHCLogger(n.log, "snapshots")); err != nil {
		return fmt.Errorf("open snapshot store %s: %w", sd, err)
	}
	return n.finishInstall()
}

// finishInstall installs the newest snapshot when the engine has not
// applied it: a received snapshot whose install was interrupted.
func (n *Node) finishInstall() error {
	list, err := n.snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	_, rc, err := n.snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", list[0].ID, err)
	}
	hdr, err := readHeader(bufio.NewReader(rc))
	rc.Close()
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", list[0].ID, err)
	}
	if hdr.Applied <= n.fsm.index.Load() {
		return nil
	}
	n.log.Warn("walraft: finishing an interrupted snapshot install", "snapshot", list[0].ID, "applied", n.fsm.index.Load(), "snapshot_applied", hdr.Applied)
	if _, rc, err = n.snaps.Open(list[0].ID); err != nil {
		return err
	}
	return n.fsm.Restore(rc)
}

func (n *Node) startRaft() error {
	me := hello{V: 1, Group: n.cfg.Group, GenBytes: n.cfg.Engine.MaxGenerationBytes, From: n.ident.ID}
	var err error
	if n.stream, err = newStreamLayer(n.cfg.PeerAddr, n.cfg.PeerTLS, me, n.log); err != nil {
		return err
	}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: n.stream, MaxPool: 4, Timeout: 10 * time.Second, Logger: newHCLogger(n.log, "raft-net"),
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.ident.ID)
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.HeartbeatTimeout / 2
	rc.CommitTimeout = 5 * time.Millisecond
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.TrailingLogs = n.cfg.TrailingLogs
	rc.NoSnapshotRestoreOnStart = true
	rc.Logger = newHCLogger(n.log, "raft")
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.logs, n.store, n.snaps, n.trans); err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	status := n.Status
	n.stream.status.Store(&status)
	if !n.cfg.Bootstrap {
		return nil
	}
	// Bootstrap acts only while the raft state is empty (a first start, or
	// one that crashed before bootstrapping); later starts ignore it.
	existing, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return fmt.Errorf("inspect raft state in %s: %w", n.cfg.Dir, err)
	}
	if existing {
		n.log.Info("walraft: bootstrap ignored: the replica already has raft state", "dir", n.cfg.Dir)
		return nil
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap group %s: %w", n.cfg.Group, err)
	}
	return nil
}

// ID is the replica's raft server id (name plus the suffix of its directory).
func (n *Node) ID() string { return n.ident.ID }

// Name is the replica's operator-facing name.
func (n *Node) Name() string { return n.ident.Name }

// PeerAddr is the address the peer transport listens on.
func (n *Node) PeerAddr() string { return n.stream.ln.Addr().String() }

// Raft exposes the underlying raft instance for diagnostics and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Close stops the replica: age sealing, raft (waiting for in-flight applies),
// the transport and the stores. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		<-n.sealDone
		if n.raft != nil {
			n.closeErr = n.raft.Shutdown().Error()
		}
		n.closeStores()
	})
	return n.closeErr
}

func (n *Node) closeStores() {
	if n.trans != nil {
		n.trans.Close()
	} else if n.stream != nil {
		n.stream.Close()
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	}
	if n.fsm != nil {
		if err := n.fsm.close(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	}
}
