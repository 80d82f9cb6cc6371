package walraft

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// hello opens every peer connection (after TLS): the dialer names its group
// and the engine settings that must be equal on every replica, and what it
// wants: the raft protocol, or this replica's status.
type hello struct {
	V        int    `json:"v"`
	Group    string `json:"group"`
	GenBytes int64  `json:"gen_bytes"`
	Kind     string `json:"kind"`
	From     string `json:"from,omitempty"`
	// To is the replica id the dialer expects at this address: a wiped
	// replica (new id) listening on an old voter's address is refused, so
	// it can never be counted as that voter.
	To string `json:"to,omitempty"`
}

// raftAddr is a replica's address in the raft configuration: id@host:port,
// so that every connection names the replica it expects.
func raftAddr(id, hostport string) raft.ServerAddress {
	return raft.ServerAddress(id + "@" + hostport)
}

// splitRaftAddr returns the id and host:port of a raft address (id "" when
// the address carries none).
func splitRaftAddr(a raft.ServerAddress) (id, hostport string) {
	if i := strings.LastIndexByte(string(a), '@'); i >= 0 {
		return string(a[:i]), string(a[i+1:])
	}
	return "", string(a)
}

// peerNetAddr is the stream layer's listen address as raft sees it.
type peerNetAddr struct {
	id string
	net.Addr
}

// String is the raft address, id@host:port.
func (a peerNetAddr) String() string { return string(raftAddr(a.id, a.Addr.String())) }

const (
	kindRaft      = "raft"
	kindStatus    = "status"
	handshakeWait = 10 * time.Second
	maxLine       = 4096
)

// streamLayer is the raft transport's connection layer: TCP, optionally
// mutual TLS, and the group handshake. Connections that fail either are
// closed and logged with the reason; raft only ever sees good ones.
type streamLayer struct {
	ln  net.Listener
	tls *tls.Config
	me  hello
	log *slog.Logger
	// status answers status connections once the replica is running.
	status atomic.Pointer[func() Status]

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once

	// isolated cuts this replica off its peers (tests of partitions): no
	// new connection either way, and open ones are closed.
	isolated atomic.Bool
	mu       sync.Mutex
	open     map[net.Conn]struct{}
}

// isolate cuts (or restores) every peer connection of this replica.
func (s *streamLayer) isolate(on bool) {
	s.isolated.Store(on)
	if !on {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.open {
		c.Close()
	}
	clear(s.open)
}

func (s *streamLayer) track(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[net.Conn]struct{}{}
	}
	s.open[c] = struct{}{}
}

func newStreamLayer(addr string, tlsConf *tls.Config, me hello, log *slog.Logger) (*streamLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer transport: listen on %s: %v: %w", addr, err, errs.ErrUnavailable)
	}
	s := &streamLayer{ln: ln, tls: tlsConf, me: me, log: log, conns: make(chan net.Conn), done: make(chan struct{})}
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error("walraft: peer listener failed", "addr", s.ln.Addr().String(), "err", err)
			return
		}
		go s.admit(c)
	}
}

// admit runs the server side of the handshake.
func (s *streamLayer) admit(c net.Conn) {
	if s.isolated.Load() {
		c.Close()
		return
	}
	remote := c.RemoteAddr().String()
	c.SetDeadline(time.Now().Add(handshakeWait))
	if s.tls != nil {
		tc := tls.Server(c, s.tls)
		if err := tc.Handshake(); err != nil {
			s.log.Warn("walraft: refused peer connection: TLS handshake failed", "remote", remote, "err", err)
			c.Close()
			return
		}
		c = tc
	}
	line, err := readLine(c)
	var h hello
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil {
		s.log.Warn("walraft: refused peer connection: bad handshake", "remote", remote, "err", err)
		c.Close()
		return
	}
	if reason := s.me.mismatch(h); reason != "" {
		s.log.Warn("walraft: refused peer connection", "remote", remote, "peer", h.From, "reason", reason)
		io.WriteString(c, "refused: "+reason+"\n")
		c.Close()
		return
	}
	if h.Kind == kindStatus {
		st := s.status.Load()
		if st == nil {
			io.WriteString(c, "refused: replica is starting\n")
			c.Close()
			return
		}
		b, _ := json.Marshal((*st)())
		c.Write(append(b, '\n'))
		c.Close()
		return
	}
	if _, err := io.WriteString(c, "ok\n"); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	s.track(c)
	select {
	case s.conns <- c:
	case <-s.done:
		c.Close()
	}
}

// mismatch says why a peer's hello is refused, or "".
func (me hello) mismatch(h hello) string {
	switch {
	case h.V != me.V:
		return fmt.Sprintf("protocol version %d, this replica speaks %d", h.V, me.V)
	case h.Group != me.Group:
		return fmt.Sprintf("peer is in group %q, this replica in group %q", h.Group, me.Group)
	case h.Kind == kindRaft && h.GenBytes != me.GenBytes:
		return fmt.Sprintf("peer seals generations at %d bytes, this replica at %d (must be equal in a group)", h.GenBytes, me.GenBytes)
	case h.To != "" && h.To != me.From:
		return fmt.Sprintf("peer expects replica %s at this address, but this is replica %s (a wiped directory gets a new id; remove the old one and add this one)", h.To, me.From)
	case h.Kind != kindRaft && h.Kind != kindStatus:
		return fmt.Sprintf("unknown connection kind %q", h.Kind)
	}
	return ""
}

func readLine(r io.Reader) ([]byte, error) {
	var out []byte
	var b [1]byte
	for len(out) < maxLine {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		if b[0] == '\n' {
			return out, nil
		}
		out = append(out, b[0])
	}
	return nil, fmt.Errorf("handshake line longer than %d bytes", maxLine)
}

// dial connects to a peer and runs the client side of the handshake; the
// reply line is returned (ok, a status, or the refusal).
func dial(addr string, tlsConf *tls.Config, h hello, timeout time.Duration) (net.Conn, []byte, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dial peer %s: %v: %w", addr, err, errs.ErrUnavailable)
	}
	c.SetDeadline(time.Now().Add(max(timeout, handshakeWait)))
	if tlsConf != nil {
		conf := tlsConf.Clone()
		if conf.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			conf.ServerName = host
		}
		tc := tls.Client(c, conf)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("peer %s: TLS handshake: %v: %w", addr, err, ErrRefused)
		}
		c = tc
	}
	b, _ := json.Marshal(h)
	if _, err := c.Write(append(b, '\n')); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("peer %s: handshake: %v: %w", addr, err, errs.ErrUnavailable)
	}
	line, err := readLine(c)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("peer %s: handshake reply: %v (a refused TLS certificate shows here; the peer's log says why): %w", addr, err, ErrRefused)
	}
	if r, ok := strings.CutPrefix(string(line), "refused: "); ok {
		c.Close()
		return nil, nil, fmt.Errorf("peer %s: %s: %w", addr, r, ErrRefused)
	}
	c.SetDeadline(time.Time{})
	return c, line, nil
}

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.isolated.Load() {
		return nil, fmt.Errorf("peer %s: this replica is isolated: %w", address, errs.ErrUnavailable)
	}
	h := s.me
	h.Kind = kindRaft
	var hostport string
	h.To, hostport = splitRaftAddr(address)
	c, line, err := dial(hostport, s.tls, h, timeout)
	if err != nil {
		s.log.Warn("walraft: peer connection failed", "peer", string(address), "err", err)
		return nil, err
	}
	if string(line) != "ok" {
		c.Close()
		return nil, fmt.Errorf("peer %s: unexpected handshake reply %q: %w", address, line, ErrRefused)
	}
	s.track(c)
	return c, nil
}

// Accept implements net.Listener (raft.StreamLayer).
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// Addr implements net.Listener; its String is this replica's raft address
// (id@host:port).
func (s *streamLayer) Addr() net.Addr { return peerNetAddr{id: s.me.From, Addr: s.ln.Addr()} }
