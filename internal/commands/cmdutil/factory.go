package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/wal"
)

// Factory builds the dependencies of a command lazily from configuration, so
// a command that needs no etcd never dials one. Tests replace its fields.
type Factory struct {
	IOStreams *IOStreams
	Now       func() time.Time

	// Config is set by the root command once flags are parsed.
	Config *Config
	Logger *slog.Logger

	mu       sync.Mutex
	etcd     *clientv3.Client
	embedded *etcdembed.Server
	wal      wal.Log
	coord    *coord.Client
	holders  []holder
	closers  []func()
}

// NewFactory returns a factory over the given streams.
func NewFactory(ios *IOStreams) *Factory {
	return &Factory{IOStreams: ios, Now: time.Now, Logger: slog.New(slog.DiscardHandler)}
}

// Global is the typed global configuration.
func (f *Factory) Global() Global { return f.Config.Global }

// JSON reports whether --output json was asked for.
func (f *Factory) JSON() bool { return f.Config != nil && f.Config.Global.Output == "json" }

// CallContext derives a context bounded by --command-timeout, for one call
// to a dependency.
func (f *Factory) CallContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.Config.Global.CommandTimeout)
}

// EtcdEndpoints returns the endpoints commands talk to, starting the
// embedded etcd first when it is configured.
func (f *Factory) EtcdEndpoints(ctx context.Context) ([]string, error) {
	g := f.Config.Global
	if !g.Embedded {
		return g.EtcdEndpoints, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.embedded != nil {
		return []string{f.embedded.Endpoint()}, nil
	}
	dir := filepath.Join(g.DataDir, "etcd")
	ctx, cancel := f.CallContext(ctx)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: dir})
	if errors.Is(err, dirlock.ErrLocked) {
		// Another walctl process runs the embedded etcd on this data dir:
		// talk to its server rather than open the directory (rule 11).
		ep, epErr := etcdembed.Endpoint(dir)
		if epErr != nil {
			return nil, fmt.Errorf("%w; and it publishes no endpoint: %v", err, epErr)
		}
		f.Logger.Debug("using the embedded etcd of another process", "dir", dir, "endpoint", ep)
		f.borrow("embedded etcd", dir)
		return []string{ep}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	f.embedded = srv
	f.closers = append(f.closers, srv.Close)
	return []string{srv.Endpoint()}, nil
}

// Etcd returns a client for the configured etcd (dialled once). The client
// does not block on dialling: each call must carry its own deadline, and an
// unreachable endpoint shows up as errs.ErrUnavailable from EtcdErr.
func (f *Factory) Etcd(ctx context.Context) (*clientv3.Client, error) {
	eps, err := f.EtcdEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.etcd != nil {
		return f.etcd, nil
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: f.Config.Global.CommandTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %v: %w", strings.Join(eps, ","), err, errs.ErrUnavailable)
	}
	f.etcd = cli
	f.closers = append(f.closers, func() { cli.Close() })
	return cli, nil
}

// EtcdErr annotates an error from an etcd call: a deadline or a closed
// connection becomes errs.ErrUnavailable naming the endpoints.
func EtcdErr(err error, endpoints []string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "Unavailable") {
		return fmt.Errorf("etcd %s did not answer: %v: %w", strings.Join(endpoints, ","), err, errs.ErrUnavailable)
	}
	return err
}

// Close releases every dependency the factory built, newest first.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.closers) - 1; i >= 0; i-- {
		f.closers[i]()
	}
	f.closers, f.etcd, f.embedded, f.wal, f.coord, f.holders = nil, nil, nil, nil, nil, nil
}
