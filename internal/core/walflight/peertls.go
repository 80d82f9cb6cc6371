package walflight

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/walctl/walctl/internal/core/errs"
)

// PeerTLS builds the mutual TLS configuration of a replica's peer transport
// from PEM files: the replica's certificate and key (presented both as a
// server and as a client) and the CA bundle that must have signed every
// peer's certificate. A peer without such a certificate is refused in the
// handshake. Unreadable or mismatched files are errs.ErrInvalid naming the
// file.
func PeerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, fmt.Errorf("peer TLS needs a certificate, a key and a CA file (got %q, %q, %q): %w", certFile, keyFile, caFile, errs.ErrInvalid)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("peer TLS key pair %s, %s: %v: %w", certFile, keyFile, err, errs.ErrInvalid)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("peer TLS CA file: %v: %w", err, errs.ErrInvalid)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("peer TLS CA file %s holds no PEM certificate: %w", caFile, errs.ErrInvalid)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
