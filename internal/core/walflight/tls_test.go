package walflight

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "walctl test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

func TestTLSWithToken(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	addr := serveInProcess(t, t.TempDir(), ServeOptions{Server: ServerOptions{TLSCertFile: cert, TLSKeyFile: key, Token: "tok"}})
	ctx := context.Background()
	c := dial(t, addr, ClientOptions{TLS: true, CAFile: cert, Token: "tok"})
	if _, err := c.CreateTable(ctx, "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	// Plaintext against a TLS server fails as unavailable, not as success.
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := Dial(dctx, addr, ClientOptions{Token: "tok"}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("plaintext dial: got %v, want ErrUnavailable", err)
	}
	if _, err := NewServer(nil, ServerOptions{TLSCertFile: cert}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("certificate without key: got %v", err)
	}
}
