package walraft

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// mtls issues a loopback certificate and returns a mutual TLS config that
// trusts only this CA.
func (ca *testCA) mtls(t *testing.T, name string) *tls.Config {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      ca.pool, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13,
	}
}

// TestMutualTLSRefusesWrongCertificate: a group runs over mutual TLS; a
// replica whose certificate comes from another CA is refused both ways,
// and the log of the side that refused says why.
func TestMutualTLSRefusesWrongCertificate(t *testing.T) {
	ca := newCA(t, "group-ca")
	c := newCluster(t, 3, func(cfg *Config) { cfg.PeerTLS = ca.mtls(t, cfg.Name) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mustCreate(t, c.leader(), "t1", 1)
	fillTable(t, c, 0, 5, 100)
	c.waitApplied()

	rogueCfg, rogueLog := baseConfig(t, "rogue")
	rogueCfg.PeerTLS = newCA(t, "other-ca").mtls(t, "rogue")
	rogue, err := Open(ctx, rogueCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	l := c.leader()
	err = l.AddReplica(ctx, "", rogue.PeerAddr())
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("adding a replica with a foreign certificate: %v", err)
	}
	waitLog(t, rogueLog, "refused peer connection: TLS handshake failed")
	_, err = QueryStatus(ctx, l.PeerAddr(), "g1", rogueCfg.PeerTLS)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("rogue reaching the leader: %v", err)
	}
	var lb *logBuf
	for i := range c.nodes {
		if c.node(i) == l {
			lb = c.logs[i]
		}
	}
	waitLog(t, lb, "refused peer connection: TLS handshake failed")
	if _, err := QueryStatus(ctx, l.PeerAddr(), "g1", nil); err == nil {
		t.Fatal("a plaintext peer reached a TLS group")
	}
	if st, err := QueryStatus(ctx, l.PeerAddr(), "g1", ca.mtls(t, "ops")); err != nil || st.ID != l.ID() {
		t.Fatalf("status over mutual TLS: %+v %v", st, err)
	}
}

// TestPeerOfAnotherGroupRefused: the handshake refuses a peer of another
// group, and a replica sealing at a different size.
func TestPeerOfAnotherGroupRefused(t *testing.T) {
	c := newCluster(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := c.leader()
	_, err := QueryStatus(ctx, l.PeerAddr(), "g2", nil)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `peer is in group "g2", this replica in group "g1"`) {
		t.Fatalf("status from another group: %v", err)
	}
	waitLog(t, c.logs[0], `peer is in group \"g2\"`)
	odd, _ := baseConfig(t, "odd")
	odd.Engine.MaxGenerationBytes = 4096
	n, err := Open(ctx, odd)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := l.AddReplica(ctx, "", n.PeerAddr()); !errors.Is(err, ErrRefused) {
		t.Fatalf("adding a replica with other seal settings: %v", err)
	}
}

// waitLog waits for a line in a replica's log: refusals are logged by the
// accepting goroutine, possibly after the dialer saw its side fail
// (failsafe deadline, not a timing assertion).
func waitLog(t *testing.T, lb *logBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(lb.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", want, lb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
