// Package kubetest starts a real kube-apiserver for tests: the binary built
// by `make kube-apiserver` (hack/kube-apiserver), backed by walctl's embedded
// etcd, with RBAC authorization, a static admin token and a service-account
// key pair generated per server, so ServiceAccount tokens can be minted with
// the TokenRequest API.
//
// No controller-manager or scheduler runs: Jobs get no Pods (tests create
// them), nothing is garbage-collected (only a Job deleted with background
// propagation disappears), and namespaces get no "default" ServiceAccount
// unless CreateNamespace makes one.
//
// Start one Server per test package, in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &apiserver)) }
package kubetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/walctl/walctl/internal/core/etcdembed"
)

// Server is a running kube-apiserver and the etcd behind it.
type Server struct {
	// URL is the API server's https URL.
	URL string
	// Dir holds the server's files; kube-apiserver.log is its output.
	Dir string

	adminToken string
	caFile     string
	etcd       *etcdembed.Server
	cmd        *exec.Cmd
	exited     chan error
}

// Options configure Start.
type Options struct {
	// Dir holds etcd's data, keys, certificates and logs; it must exist.
	Dir string
	// Binary is the kube-apiserver to run (default: BinaryPath()).
	Binary string
	// StartTimeout bounds the wait for /readyz (default 60s).
	StartTimeout time.Duration
}

// Start runs an embedded etcd and a kube-apiserver against it and waits until
// the server is ready (post-start hooks done, RBAC bootstrap roles in place).
// On cancellation or failure everything started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.Binary == "" {
		if opts.Binary, err = BinaryPath(); err != nil {
			return nil, err
		}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	s := &Server{Dir: opts.Dir, exited: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.etcd, err = etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(opts.Dir, "etcd")}); err != nil {
		return nil, err
	}
	args, err := s.prepare(opts.Dir)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(opts.Dir, "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(opts.Binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.Binary, err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := s.waitReady(wctx); err != nil {
		return nil, fmt.Errorf("kube-apiserver not ready (log: %s): %w\n%s", logf.Name(), err, tail(logf.Name(), 4000))
	}
	return s, nil
}

// prepare writes the keys and token file and returns the server's flags.
func (s *Server) prepare(dir string) ([]string, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	s.adminToken = hex.EncodeToString(tok)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(s.adminToken+",walctl-test-admin,walctl-test-admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	s.caFile = filepath.Join(certs, "apiserver.crt")
	s.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	return []string{
		"--etcd-servers=" + s.etcd.Endpoint(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // a loopback address cannot back the kubernetes Service
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certs,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--token-auth-file=" + tokens,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=1",
	}, nil
}

// waitReady polls /readyz with the admin token until it answers 200.
func (s *Server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("kube-apiserver exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
		if _, err := os.Stat(s.caFile); err != nil {
			last = err
			continue
		}
		cs, err := kubernetes.NewForConfig(s.Admin())
		if err != nil {
			return err
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%v: %s", err, body)
	}
}

// Admin is a new rest.Config of a system:masters identity (static token),
// trusting the server's self-signed certificate; callers may modify it. It
// makes no request.
func (s *Server) Admin() *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.caFile},
		QPS:             -1, // no client-side throttling in tests
		Timeout:         30 * time.Second,
	}
}

// AdminClient is a clientset for Admin. It makes no request.
func (s *Server) AdminClient() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(s.Admin())
}

// Close stops the API server (SIGTERM, then SIGKILL after 10s) and etcd. It
// is safe to call more than once.
func (s *Server) Close() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		select {
		case <-s.exited:
		case <-t.C:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		t.Stop()
		s.cmd = nil
	}
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// ModuleRoot is the walctl module's root directory, found by walking up from
// the working directory (a test's package directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/walctl/walctl\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: walctl module root not found above the working directory")
		}
		dir = parent
	}
}

// ErrNoBinary reports that the kube-apiserver binary has not been built.
var ErrNoBinary = errors.New("kube-apiserver binary missing: run `make kube-apiserver` in the walctl module root (it builds bin/kube-apiserver from hack/kube-apiserver)")

// BinaryPath is <module root>/bin/kube-apiserver; a missing binary is
// ErrNoBinary, which tests report as a failure, not a skip.
func BinaryPath() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "kube-apiserver")
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s: %w", p, ErrNoBinary)
	}
	return p, nil
}
