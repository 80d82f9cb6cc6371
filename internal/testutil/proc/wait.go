package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ErrGone is returned by a readiness wait whose process ended first.
var ErrGone = errors.New("the process ended first")

// WaitForFile waits until path exists with content and returns the content
// trimmed. It watches path's directory (inotify), so it wakes when the file
// is written; a slow tick covers a directory that does not exist yet. It
// returns ErrGone once gone is closed (the writer ended) without the file,
// and ctx's error when ctx ends.
func WaitForFile(ctx context.Context, path string, gone <-chan struct{}) (string, error) {
	var events <-chan fsnotify.Event
	tickEvery := 50 * time.Millisecond
	if w, err := fsnotify.NewWatcher(); err == nil {
		defer w.Close()
		if w.Add(filepath.Dir(path)) == nil {
			events, tickEvery = w.Events, 250*time.Millisecond
		}
	}
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	read := func() (string, bool) {
		b, err := os.ReadFile(path)
		b = bytes.TrimSpace(b)
		return string(b), err == nil && len(b) > 0
	}
	for {
		if s, ok := read(); ok {
			return s, nil
		}
		select {
		case <-events:
		case <-tick.C:
		case <-gone:
			if s, ok := read(); ok {
				return s, nil
			}
			return "", fmt.Errorf("waiting for %s: %w", path, ErrGone)
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		}
	}
}

// WaitForPort waits until addr (host:port) accepts TCP connections, or
// until gone is closed (ErrGone) or ctx ends. A listening socket announces
// nothing to watch, so this dials every 20ms.
func WaitForPort(ctx context.Context, addr string, gone <-chan struct{}) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-tick.C:
		case <-gone:
			return fmt.Errorf("waiting for %s to listen: %w", addr, ErrGone)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to listen: %v: %w", addr, err, ctx.Err())
		}
	}
}

// WaitForState waits until process pid is stopped (state T in /proc) or,
// with stopped false, no longer stopped; until gone is closed (ErrGone) or
// ctx ends. A stop announces nothing to a parent whose wait4 runs
// elsewhere (exec.Cmd.Wait), so this reads /proc every 5ms.
func WaitForState(ctx context.Context, pid int, stopped bool, gone <-chan struct{}) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := State(pid)
		if err == nil && (st == "T") == stopped {
			return nil
		}
		select {
		case <-tick.C:
		case <-gone:
			return fmt.Errorf("waiting for process %d (stopped=%v): %w", pid, stopped, ErrGone)
		case <-ctx.Done():
			return fmt.Errorf("waiting for process %d in state %s (%v) to be stopped=%v: %w", pid, st, err, stopped, ctx.Err())
		}
	}
}

// FreePort returns a loopback address with a port that was free a moment
// ago, for servers that must be told their port (etcd). Another process may
// take it meanwhile: the caller's readiness wait then fails.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WaitFile waits for path to exist with content and returns it trimmed; it
// fails the test if the process ends first or the wait timeout passes.
func (p *Proc) WaitFile(path string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	s, err := WaitForFile(ctx, path, p.done)
	switch {
	case errors.Is(err, ErrGone):
		p.t.Fatalf("%s ended before writing %s: %s", p.Name, filepath.Base(path), p.Wait())
	case err != nil:
		p.t.Fatalf("%s: %v; stderr:\n%s", p.Name, err, tail(p.Stderr()))
	}
	return s
}

// WaitPort waits until the process listens on addr; it fails the test if
// the process ends first or the wait timeout passes.
func (p *Proc) WaitPort(addr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if err := WaitForPort(ctx, addr, p.done); errors.Is(err, ErrGone) {
		p.t.Fatalf("%s ended before listening on %s: %s", p.Name, addr, p.Wait())
	} else if err != nil {
		p.t.Fatalf("%s: %v; stderr:\n%s", p.Name, err, tail(p.Stderr()))
	}
}
