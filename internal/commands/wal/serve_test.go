package wal

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	corewal "github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

// wal serve serves the directory over Flight on the address it writes to
// --addr-file, demands the token, and on cancellation (SIGTERM) returns nil
// with the directory unlocked.
func TestServeRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := &ServeOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Token: "s3cret", Dir: dir,
		Listen: "127.0.0.1:0", AddrFile: filepath.Join(t.TempDir(), "ENDPOINT")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveRun(ctx, opts) }()
	addr := waitAddr(t, opts.AddrFile, done)

	cli, err := walflight.Dial(ctx, addr, walflight.ClientOptions{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.CreateTable(ctx, "t", schema, 2); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	wrong, err := walflight.Dial(ctx, addr, walflight.ClientOptions{Token: "guess"})
	if err == nil {
		_, err = wrong.Tables(ctx)
		wrong.Close()
	}
	if err == nil {
		t.Fatal("a wrong token was served")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
	eng, err := corewal.Open(dir, corewal.Options{})
	if err != nil {
		t.Fatalf("the directory stays locked or damaged: %v", err)
	}
	defer eng.Close()
	if info, err := eng.Table(context.Background(), "t"); err != nil || info.Shards != 2 {
		t.Fatalf("table served is not in the directory: %+v %v", info, err)
	}
}

// An address that cannot be bound is a dependency failure (exit 5), and
// nothing is written to --addr-file.
func TestServeRunListenFails(t *testing.T) {
	opts := &ServeOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Dir: t.TempDir(),
		Listen: "192.0.2.1:1", AddrFile: filepath.Join(t.TempDir(), "ENDPOINT")}
	err := serveRun(context.Background(), opts)
	if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "192.0.2.1:1") {
		t.Fatalf("err = %v, want ErrUnavailable naming the address", err)
	}
	if _, err := os.Stat(opts.AddrFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("addr file written: %v", err)
	}
}

// waitAddr waits for the server to write its address, or to fail.
func waitAddr(t *testing.T, file string, done <-chan error) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("serve ended before writing its address: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatal("no address written within a minute")
	return ""
}
