package tlsgen

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// A leaf verifies against its own CA and not against another one.
func TestIssueVerifies(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Issue("r1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ca   *CA
		want bool
	}{{ca, true}, {other, false}} {
		pem, _ := os.ReadFile(c.ca.CertFile)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if (err == nil) != c.want {
			t.Errorf("verify against %s: %v, want ok=%v", c.ca.CertFile, err, c.want)
		}
	}
}
