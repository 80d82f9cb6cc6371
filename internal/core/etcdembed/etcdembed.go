// Package etcdembed runs a real, single-member etcd server inside the process
// on loopback: walctl's embedded default (`--embedded`), and the etcd that
// tests and testscripts start. It is the same server code as a production
// etcd (go.etcd.io/etcd/server/v3/embed), so every coordination rule tested
// against it is tested against etcd itself.
//
// The data directory is locked for the life of the server (DESIGN.md §3 rule
// 11). The client endpoint is written to <dir>/ENDPOINT so that a second walctl
// process pointed at the same directory can talk to the holder's server
// instead of opening the directory itself (see Endpoint).
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/errs"
)

// EndpointFile names the file, inside the data directory, that holds the
// running server's client URL.
const EndpointFile = "ENDPOINT"

// Options configure an embedded server. The zero value is usable with Dir set.
type Options struct {
	// Dir is the etcd data directory; it is created if missing and locked.
	Dir string
	// ClientAddr is the loopback host:port to serve clients on. Empty picks a
	// free port.
	ClientAddr string
	// MetricsAddr, when set, serves etcd's own Prometheus metrics (/metrics)
	// on that host:port, so tests can measure what the server did.
	MetricsAddr string
	// StartTimeout bounds the wait for the server to become ready (default 30s).
	StartTimeout time.Duration
	// LogLevel is etcd's log level (default "error"); logs go to <Dir>/etcd.log.
	LogLevel string
}

// Server is a running embedded etcd.
type Server struct {
	etcd     *embed.Etcd
	lock     *dirlock.Lock
	endpoint string
	metrics  string
	dir      string
}

// Start starts the server and waits until it serves clients or ctx ends. When
// another process holds Dir, the error wraps dirlock.ErrLocked and names its
// pid; Endpoint(Dir) then tells where that process serves.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("embedded etcd: no data directory: %w", errs.ErrInvalid)
	}
	lock, err := dirlock.Acquire(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	s, err := start(ctx, opts)
	if err != nil {
		lock.Release()
		return nil, err
	}
	s.lock = lock
	if err := writeEndpoint(opts.Dir, s.endpoint); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func start(ctx context.Context, opts Options) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Name = "walctl"
	cfg.Dir = filepath.Join(opts.Dir, "member-data")
	cfg.LogLevel = opts.LogLevel
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	cfg.LogOutputs = []string{filepath.Join(opts.Dir, "etcd.log")}
	clientAddr := opts.ClientAddr
	if clientAddr == "" {
		clientAddr = "127.0.0.1:0"
	}
	cu, err := url.Parse("http://" + clientAddr)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: client address %q: %v: %w", clientAddr, err, errs.ErrInvalid)
	}
	pu, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	metricsAddr := opts.MetricsAddr
	if strings.HasSuffix(metricsAddr, ":0") {
		// embed does not expose its metrics listener, so a free port is
		// chosen here; the window in which another process could take it is
		// small and only tests ask for it.
		if metricsAddr, err = freePort(metricsAddr); err != nil {
			return nil, fmt.Errorf("embedded etcd: metrics address: %w", err)
		}
	}
	if metricsAddr != "" {
		mu, err := url.Parse("http://" + metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("embedded etcd: metrics address %q: %v: %w", opts.MetricsAddr, err, errs.ErrInvalid)
		}
		cfg.ListenMetricsUrls = []url.URL{*mu}
		cfg.Metrics = "extensive"
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd in %s: %w", opts.Dir, err)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", opts.Dir, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s did not become ready within %s: %w", opts.Dir, timeout, errs.ErrUnavailable)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", opts.Dir, ctx.Err())
	}
	s := &Server{etcd: e, dir: opts.Dir, endpoint: "http://" + e.Clients[0].Addr().String()}
	if metricsAddr != "" {
		s.metrics = "http://" + metricsAddr + "/metrics"
	}
	return s, nil
}

// Endpoint is the client URL, e.g. http://127.0.0.1:40123.
func (s *Server) Endpoint() string { return s.endpoint }

// MetricsURL is the URL of etcd's Prometheus metrics, or "" when not enabled.
func (s *Server) MetricsURL() string { return s.metrics }

// Dir is the data directory.
func (s *Server) Dir() string { return s.dir }

// Close stops the server, waits for it to shut down and releases the
// directory. It is safe to call more than once.
func (s *Server) Close() {
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
		_ = os.Remove(filepath.Join(s.dir, EndpointFile))
	}
	if s.lock != nil {
		s.lock.Release()
		s.lock = nil
	}
}

// Endpoint reads the client URL of the server holding dir, as written by
// Start. It fails with errs.ErrNotFound when no server has published one.
func Endpoint(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, EndpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no embedded etcd endpoint in %s: %w", dir, errs.ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func freePort(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func writeEndpoint(dir, endpoint string) error {
	tmp := filepath.Join(dir, EndpointFile+".tmp")
	if err := os.WriteFile(tmp, []byte(endpoint+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, EndpointFile))
}
