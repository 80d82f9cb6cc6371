package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// etcdNet carries go.etcd.io/raft messages between the replicas over
// loopback TCP, as a real group's transport would: one connection per
// ordered pair of replicas, each message a length-prefixed protobuf frame
// written through a buffer that is flushed whenever its queue is empty,
// decoded by the receiver and stepped into its node. With -tls the
// connections are mutual TLS 1.3 (walctl's peers use mutual TLS).
type etcdNet struct {
	out       map[[2]uint64]chan *pb.Message
	listeners []net.Listener
	conns     []net.Conn
	wg        sync.WaitGroup
}

// newEtcdNet connects every ordered pair of nodes; step delivers a received
// message to its node.
func newEtcdNet(ctx context.Context, ids []uint64, step func(to uint64, m *pb.Message)) (*etcdNet, error) {
	var srv, cli *tls.Config
	if *useTLS {
		var err error
		if srv, cli, err = tlsConfigs(); err != nil {
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
		if srv != nil {
			ln = tls.NewListener(ln, srv)
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
			if cli != nil {
				c, err = tls.Dial("tcp", addrs[to], cli)
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

// tlsConfigs makes a throw-away CA and one certificate for 127.0.0.1 that
// every replica presents and requires (mutual TLS).
func tlsConfigs() (srv, cli *tls.Config, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "raftceiling CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "replica"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	srv = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	cli = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	return srv, cli, nil
}
