package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// etcdNode is one replica: its raft.Node, the storage raft reads from, its
// durable log file, and the proposals waiting for their entry to commit.
type etcdNode struct {
	id      uint64
	n       raft.Node
	storage *raft.MemoryStorage
	log     *logFile
	applied *logFile // -apply: the second durable write
	net     *etcdNet // -tcp: nil hands messages over in memory
	inboxes map[uint64]chan *pb.Message
	elected chan<- *etcdNode // told when this replica becomes leader
	mu      sync.Mutex
	waiting map[uint64]chan error
}

func (e *etcdNode) send(ctx context.Context, msgs []*pb.Message) {
	for _, m := range msgs {
		if e.net != nil {
			e.net.send(ctx, e.id, m)
			continue
		}
		select {
		case e.inboxes[m.GetTo()] <- m:
		case <-ctx.Done():
			return
		}
	}
}

// run is the Ready loop: a leader sends before it persists (the entries it
// sends are its own; a quorum still needs a durable copy on each counted
// replica), a follower only after, as raft's contract requires.
func (e *etcdNode) run(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			e.n.Tick()
		case rd := <-e.n.Ready():
			lead := e.n.Status().RaftState == raft.StateLeader
			if rd.SoftState != nil && rd.SoftState.RaftState == raft.StateLeader {
				select {
				case e.elected <- e:
				default:
				}
			}
			if lead {
				e.send(ctx, rd.Messages)
			}
			if len(rd.Entries) > 0 {
				frames := make([][]byte, len(rd.Entries))
				for i, ent := range rd.Entries {
					frames[i] = ent.GetData()
				}
				if err := e.log.append(frames); err != nil {
					log.Fatal(err) // a measurement without a durable log means nothing
				}
			}
			if !raft.IsEmptyHardState(rd.HardState) {
				e.storage.SetHardState(rd.HardState)
			}
			e.storage.Append(rd.Entries)
			if !lead {
				e.send(ctx, rd.Messages)
			}
			e.apply(rd.CommittedEntries)
			e.n.Advance()
		}
	}
}

// apply writes the proposals among ents to the second file durably (with
// -apply), then answers them.
func (e *etcdNode) apply(ents []*pb.Entry) {
	if e.applied != nil {
		var frames [][]byte
		for _, ent := range ents {
			if ent.GetType() == pb.EntryNormal && len(ent.GetData()) >= 8 {
				frames = append(frames, ent.GetData())
			}
		}
		if len(frames) > 0 {
			if err := e.applied.append(frames); err != nil {
				log.Fatal(err)
			}
		}
	}
	for _, ent := range ents {
		e.commit(ent)
	}
}

func (e *etcdNode) commit(ent *pb.Entry) {
	if ent.GetType() == pb.EntryConfChange {
		var cc pb.ConfChange
		if err := proto.Unmarshal(ent.GetData(), &cc); err == nil {
			e.n.ApplyConfChange(&cc)
		}
		return
	}
	if len(ent.GetData()) < 8 {
		return
	}
	id := binary.LittleEndian.Uint64(ent.GetData())
	e.mu.Lock()
	if w := e.waiting[id]; w != nil {
		w <- nil
		delete(e.waiting, id)
	}
	e.mu.Unlock()
}

func runEtcd() (float64, error) {
	raft.SetLogger(&raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)})
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	var nodes []*etcdNode
	var tnet *etcdNet
	defer func() { // stop every loop before the log files close
		cancel()
		loops.Wait()
		for _, e := range nodes {
			e.n.Stop()
			e.log.close()
			if e.applied != nil {
				e.applied.close()
			}
		}
		if tnet != nil {
			tnet.close()
		}
	}()
	elected := make(chan *etcdNode, 3)
	inboxes := map[uint64]chan *pb.Message{}
	for id := uint64(1); id <= 3; id++ {
		inboxes[id] = make(chan *pb.Message, 4096)
	}
	for id := uint64(1); id <= 3; id++ {
		lf, err := openLog("raftceiling.etcd." + strconv.FormatUint(id, 10))
		if err != nil {
			return 0, err
		}
		st := raft.NewMemoryStorage()
		c := &raft.Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: st, MaxSizePerMsg: 16 << 20, MaxInflightMsgs: 256}
		e := &etcdNode{id: id, storage: st, log: lf, inboxes: inboxes, elected: elected, waiting: map[uint64]chan error{}}
		if *applied {
			if e.applied, err = openLog("raftceiling.etcd.applied." + strconv.FormatUint(id, 10)); err != nil {
				return 0, err
			}
		}
		e.n = raft.StartNode(c, []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}})
		nodes = append(nodes, e)
	}
	if *useTCP {
		var err error
		tnet, err = newEtcdNet(ctx, []uint64{1, 2, 3}, func(to uint64, m *pb.Message) { nodes[to-1].n.Step(ctx, m) })
		if err != nil {
			return 0, err
		}
		for _, e := range nodes {
			e.net = tnet
		}
	}
	for _, e := range nodes { // the loops start once the transport is set
		e.start(ctx, &loops, inboxes[e.id])
	}
	var leader *etcdNode
	select {
	case leader = <-elected:
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no leader elected in 10 s")
	}
	var idmu sync.Mutex
	var next uint64
	return propose(func(_ int, data []byte) error {
		idmu.Lock()
		next++
		id := next
		idmu.Unlock()
		return leader.propose(ctx, id, data)
	})
}

// start runs the node's Ready loop and the loop stepping what arrives in
// memory on in.
func (e *etcdNode) start(ctx context.Context, loops *sync.WaitGroup, in chan *pb.Message) {
	loops.Add(2)
	go func() { defer loops.Done(); e.run(ctx) }()
	go func() {
		defer loops.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-in:
				e.n.Step(ctx, m)
			}
		}
	}()
}

// propose proposes data as entry id and waits until it is answered.
func (e *etcdNode) propose(ctx context.Context, id uint64, data []byte) error {
	binary.LittleEndian.PutUint64(data, id)
	w := make(chan error, 1)
	e.mu.Lock()
	e.waiting[id] = w
	e.mu.Unlock()
	if err := e.n.Propose(ctx, data); err != nil {
		return err
	}
	select {
	case err := <-w:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("entry %d not committed in 30 s", id)
	}
}
