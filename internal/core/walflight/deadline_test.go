package walflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/hanglog"
)

// serveHangable serves a real engine, wrapped so that it can stop
// answering, on a real gRPC listener, and dials it with timeout.
func serveHangable(t *testing.T, timeout time.Duration) (*hanglog.Log, *Client) {
	t.Helper()
	eng, err := wal.Open(filepath.Join(t.TempDir(), "wal"), wal.Options{MaxGenerationAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	h := hanglog.New(eng)
	srv, err := NewServer(h, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return h, dial(t, lis.Addr().String(), ClientOptions{CallTimeout: timeout})
}

func appendN(t *testing.T, c *Client, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateTable(ctx, "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		rec := makeRecord(int64(i), 3)
		_, err := c.Append(ctx, "t", 0, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A server that accepts calls and never answers: every call fails with
// ErrServerUnavailable after the call timeout, not when the caller's much
// longer context ends (issue 12 item 4).
func TestCallTimeoutOnHungServer(t *testing.T) {
	h, c := serveHangable(t, 300*time.Millisecond)
	appendN(t, c, 1)
	h.Hang()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := makeRecord(9, 1)
	defer rec.Release()
	calls := map[string]func() error{
		"stats":         func() error { _, err := c.Stats(ctx, "t", nil); return err },
		"advance epoch": func() error { _, err := c.AdvanceEpoch(ctx, "t", 0); return err },
		"append":        func() error { _, err := c.Append(ctx, "t", 0, rec); return err },
		"read": func() error {
			return c.Read(ctx, "t", 0, 1, 0, func(wal.Entry) error { return nil })
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrServerUnavailable) || !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("%s on a hung server: %v, want ErrServerUnavailable", name, err)
		}
		if ctx.Err() != nil || !strings.Contains(err.Error(), "command-timeout") {
			t.Fatalf("%s: not the call timeout that ended it: %v", name, err)
		}
	}
	if h.Blocked() < int64(len(calls)) {
		t.Fatalf("only %d calls reached the server", h.Blocked())
	}
}

// A streaming read is bounded per message: a read that takes far longer
// than the timeout in total, with every entry arriving (or being consumed)
// within it, is not cut; one whose server stalls mid-stream is.
func TestReadIdleDeadline(t *testing.T) {
	h, c := serveHangable(t, 300*time.Millisecond)
	appendN(t, c, 8)
	ctx := context.Background()
	h.SetReadGap(100 * time.Millisecond) // 8 entries: 800ms from the server
	n := 0
	err := c.Read(ctx, "t", 0, 1, 0, func(wal.Entry) error {
		n++
		if n == 2 {
			time.Sleep(500 * time.Millisecond) // the consumer's time does not count
		}
		return nil
	})
	if err != nil || n != 8 {
		t.Fatalf("slow but live read: %d entries, %v", n, err)
	}

	h.SetReadGap(50 * time.Millisecond) // the server is behind the consumer when it stalls
	n = 0
	err = c.Read(ctx, "t", 0, 1, 0, func(wal.Entry) error {
		if n++; n == 3 {
			h.Hang()
		}
		return nil
	})
	h.Resume()
	if !errors.Is(err, ErrServerUnavailable) || !strings.Contains(err.Error(), "no entry within") {
		t.Fatalf("stalled read after %d entries: %v, want ErrServerUnavailable", n, err)
	}
}

// A call stopped by its caller's cancellation keeps the caller's cause: a
// round stopped because its claim was lost reports the claim's fenced
// error, not "context canceled: dependency unavailable".
func TestCallerCauseSurvives(t *testing.T) {
	h, c := serveHangable(t, time.Minute)
	appendN(t, c, 1)
	h.Hang()
	lost := fmt.Errorf("claim on t replaced: %w", errs.ErrFenced)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		for h.Blocked() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel(lost)
	}()
	_, err := c.Stats(ctx, "t", nil)
	if !errors.Is(err, lost) || errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("got %v, want the caller's cause %v", err, lost)
	}
}
