package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/tlsgen"
)

// etcdNet carries go.etcd.io/raft messages between the replicas over
// loopback TCP, as a real group's transport would: one connection per
// ordered pair of replicas, each message a length-prefixed protobuf frame
// written through a buffer that is flushed whenever its queue is empty,
// decoded by the receiver and stepped into its node. With -tls the
// connections are mutual TLS with walctl's peer configuration.
type etcdNet struct {
	out       map[[2]uint64]chan *pb.Message
	listeners []net.Listener
	conns     []net.Conn
	wg        sync.WaitGroup
}

// newEtcdNet connects every ordered pair of nodes; step delivers a received
// message to its node.
func newEtcdNet(ctx context.Context, ids []uint64, step func(to uint64, m *pb.Message)) (*etcdNet, error) {
	var conf *tls.Config
	if *useTLS {
		var err error
		if conf, err = peerTLS(); err != nil {
			return nil, err
		}
	}
	t := &etcdNet{out: map[[2]uint64]chan *pb.Message{}}
	addrs := map[uint64]string{}
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.close()
			return nil, err
		}
		if conf != nil {
			ln = tls.NewListener(ln, conf)
		}
		t.listeners, addrs[id] = append(t.listeners, ln), ln.Addr().String()
		t.wg.Add(1)
		go func(to uint64) {
			defer t.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.wg.Add(1)
				go func() { defer t.wg.Done(); receive(c, to, step) }()
			}
		}(id)
	}
	for _, from := range ids {
		for _, to := range ids {
			if from == to {
				continue
			}
			var c net.Conn
			var err error
			if conf != nil {
				c, err = tls.Dial("tcp", addrs[to], conf)
			} else {
				c, err = net.Dial("tcp", addrs[to])
			}
			if err != nil {
				t.close()
				return nil, err
			}
			ch := make(chan *pb.Message, 4096)
			t.out[[2]uint64{from, to}], t.conns = ch, append(t.conns, c)
			t.wg.Add(1)
			go func() { defer t.wg.Done(); sendLoop(ctx, c, ch) }()
		}
	}
	return t, nil
}

func (t *etcdNet) send(ctx context.Context, from uint64, m *pb.Message) {
	select {
	case t.out[[2]uint64{from, m.GetTo()}] <- m:
	case <-ctx.Done():
	}
}

func (t *etcdNet) close() {
	for _, ln := range t.listeners {
		ln.Close()
	}
	for _, c := range t.conns {
		c.Close()
	}
	t.wg.Wait()
}

func sendLoop(ctx context.Context, c net.Conn, ch chan *pb.Message) {
	w := bufio.NewWriterSize(c, 1<<20)
	var hdr [4]byte
	for {
		var m *pb.Message
		select {
		case <-ctx.Done():
			return
		case m = <-ch:
		}
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		binary.LittleEndian.PutUint32(hdr[:], uint32(len(b)))
		if _, err := w.Write(hdr[:]); err != nil {
			return
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		if len(ch) == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

func receive(c net.Conn, to uint64, step func(uint64, *pb.Message)) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<20)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		b := make([]byte, binary.LittleEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			panic(err)
		}
		step(to, m)
	}
}

// peerTLS is walctl's peer transport configuration (walflight.PeerTLS:
// mutual TLS, one certificate presented as server and client) over a
// throw-away CA and loopback certificate (tlsgen) in a temporary directory.
func peerTLS() (*tls.Config, error) {
	tmp, err := os.MkdirTemp(*dir, "raftceiling-tls-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // loaded into the configuration below
	ca, err := tlsgen.NewCA(tmp, "raftceiling")
	if err != nil {
		return nil, err
	}
	pair, err := ca.Issue("replica")
	if err != nil {
		return nil, err
	}
	return walflight.PeerTLS(pair.CertFile, pair.KeyFile, ca.CertFile)
}
