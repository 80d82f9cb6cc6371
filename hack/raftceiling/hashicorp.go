package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// hcStore keeps entries in memory for reads and writes each batch to its
// log file durably before returning, as raft requires of a LogStore.
type hcStore struct {
	*raft.InmemStore
	log *logFile
}

func (s *hcStore) StoreLogs(logs []*raft.Log) error {
	frames := make([][]byte, len(logs))
	for i, l := range logs {
		frames[i] = l.Data
	}
	if err := s.log.append(frames); err != nil {
		return err
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *hcStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

func runHashicorp() (float64, error) {
	var trans []*raft.NetworkTransport
	var servers []raft.Server
	for i := 0; i < 3; i++ {
		t, err := raft.NewTCPTransport("127.0.0.1:0", nil, 4, 10*time.Second, io.Discard)
		if err != nil {
			return 0, err
		}
		defer t.Close()
		trans = append(trans, t)
		servers = append(servers, raft.Server{ID: raft.ServerID(strconv.Itoa(i)), Address: t.LocalAddr()})
	}
	var nodes []*raft.Raft
	elected := make(chan *raft.Raft, 3)
	stop := make(chan struct{})
	defer close(stop)
	for i := 0; i < 3; i++ {
		c := raft.DefaultConfig()
		c.LocalID = raft.ServerID(strconv.Itoa(i))
		c.LogOutput = io.Discard
		c.CommitTimeout = 5 * time.Millisecond // as walctl's replicas
		notify := make(chan bool, 1)
		c.NotifyCh = notify
		lf, err := openLog("raftceiling.hashicorp." + strconv.Itoa(i))
		if err != nil {
			return 0, err
		}
		defer lf.close()
		mem := raft.NewInmemStore()
		r, err := raft.NewRaft(c, nopFSM{}, &hcStore{InmemStore: mem, log: lf}, mem, raft.NewInmemSnapshotStore(), trans[i])
		if err != nil {
			return 0, err
		}
		defer r.Shutdown()
		nodes = append(nodes, r)
		go func() {
			for {
				select {
				case lead := <-notify:
					if lead {
						elected <- r
					}
				case <-stop:
					return
				}
			}
		}()
	}
	if err := nodes[0].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		return 0, err
	}
	var leader *raft.Raft
	select {
	case leader = <-elected:
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no leader elected in 10 s")
	}
	return propose(func(_ int, data []byte) error { return leader.Apply(data, 30*time.Second).Error() })
}
