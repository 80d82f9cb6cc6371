package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

// WALEndpointFile names the file in a WAL directory in which the process
// holding it (`walctl wal serve`) publishes its address, so that a later
// command on the same data dir talks to it instead of being refused.
const WALEndpointFile = "ENDPOINT"

// WALDir is the directory of the in-process WAL engine.
func (f *Factory) WALDir() string { return filepath.Join(f.Config.Global.DataDir, "wal") }

// WALEngineOptions are the engine options from configuration.
func (f *Factory) WALEngineOptions() wal.Options {
	return wal.Options{
		MaxGenerationBytes: f.Config.Int64(KeyWALMaxGenerationBytes),
		MaxGenerationAge:   f.Config.Duration(KeyWALMaxGenerationAge),
		Logger:             f.Logger,
	}
}

// WAL returns the configured WAL, opened once: the server named by --wal, or
// the in-process engine on <data-dir>/wal. When another process holds that
// directory and publishes its address, the WAL is reached through it.
func (f *Factory) WAL(ctx context.Context) (wal.Log, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wal != nil {
		return f.wal, nil
	}
	addr := f.Config.Global.WAL
	if addr == "" && f.Config.String(KeyWALGroups) != "" {
		groups, err := f.WALGroups()
		if err != nil {
			return nil, err
		}
		f.wal = f.newWALRouter(groups)
		return f.wal, nil
	}
	if addr == "" {
		eng, err := wal.Open(f.WALDir(), f.WALEngineOptions())
		if err == nil {
			f.wal = eng
			f.closers = append(f.closers, func() { eng.Close() })
			return eng, nil
		}
		if !errors.Is(err, dirlock.ErrLocked) {
			return nil, fmt.Errorf("open WAL: %w", err)
		}
		b, rerr := os.ReadFile(filepath.Join(f.WALDir(), WALEndpointFile))
		if rerr != nil {
			return nil, fmt.Errorf("%w (it serves no address; point --wal at its server)", err)
		}
		addr = strings.TrimSpace(string(b))
		f.Logger.Debug("using the WAL server of the process holding the data dir", "addr", addr)
		f.borrow("WAL", f.WALDir())
	}
	cctx, cancel := context.WithTimeout(ctx, f.Config.Global.CommandTimeout)
	defer cancel()
	cli, err := walflight.Dial(cctx, addr, f.walClientOptions())
	if err != nil {
		return nil, fmt.Errorf("WAL server %s: %w", addr, err)
	}
	f.wal = cli
	f.closers = append(f.closers, func() { cli.Close() })
	return cli, nil
}

// Timeout is --command-timeout.
func (f *Factory) Timeout() time.Duration { return f.Config.Global.CommandTimeout }

// ShareLocalWAL serves the in-process WAL engine, when that is what this
// process holds, over Arrow Flight on a loopback port and publishes the
// address in <wal dir>/ENDPOINT, so that other walctl commands on the same
// data dir reach it instead of being refused by the directory lock. It does
// nothing when the WAL is a remote server. The server stops when the factory
// closes.
func (f *Factory) ShareLocalWAL(ctx context.Context) error {
	log, err := f.WAL(ctx)
	if err != nil {
		return err
	}
	if _, local := log.(*wal.Engine); !local {
		return nil
	}
	srv, err := walflight.NewServer(log, walflight.ServerOptions{Token: f.Config.Global.WALToken, Logger: f.Logger})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(lis) }()
	path := filepath.Join(f.WALDir(), WALEndpointFile)
	if err := os.WriteFile(path, []byte(lis.Addr().String()+"\n"), 0o644); err != nil {
		lis.Close()
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Closers run newest first: the server stops before the engine closes.
	f.closers = append(f.closers, func() {
		_ = os.Remove(path)
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	return nil
}
