package worker

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/hanglog"
)

// serveHangable serves the env's WAL engine over Arrow Flight on a real
// gRPC listener, through a wrapper that can stop answering, and dials it
// with callTimeout (--command-timeout).
func (e *env) serveHangable(callTimeout time.Duration) (*hanglog.Log, *walflight.Client) {
	e.t.Helper()
	h := hanglog.New(e.log)
	srv, err := walflight.NewServer(h, walflight.ServerOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go srv.Serve(lis)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	cli, err := walflight.Dial(e.ctx, lis.Addr().String(), walflight.ClientOptions{CallTimeout: callTimeout})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return h, cli
}

// Issue 12 item 4: a WAL server that accepts calls and never answers does
// not pin the table. The worker holds the claim (idle release and slice
// out of reach, keep-alives renewing a one-minute lease), the server hangs,
// and the round that cannot reach it releases the claim — the claim key
// disappears from etcd long before its lease could expire, and is not
// taken again while the WAL stays silent. Once the server answers again the
// worker claims the table back and publishes the rest exactly once.
func TestHungWALServerReleasesClaim(t *testing.T) {
	e := newEnv(t, 1, "orders")
	e.mustProduce("orders", 0, 3, 20)
	h, cli := e.serveHangable(300 * time.Millisecond)
	co := e.st.Coord(t, coord.Config{ClaimTTL: time.Minute})
	a := e.startOn(cli, co, "worker-a", publish.Limits{}, Config{
		Tables:       []string{"orders"},
		PollInterval: 20 * time.Millisecond,
		Slice:        coord.SlicePolicy{MaxDuration: time.Hour},
		IdleRelease:  IdlePolicy{MaxRounds: 1 << 30},
		ErrorBackoff: 100 * time.Millisecond,
	})
	waitFor(t, 20*time.Second, "a to publish", func() bool { return e.published("orders") })
	held, err := e.co.Get(e.ctx, "orders")
	if err != nil || held.Owner.ID != "worker-a" {
		t.Fatalf("claim: %+v %v, want worker-a's", held, err)
	}

	h.Hang()
	waitFor(t, 20*time.Second, "the claim key to be deleted", func() bool {
		_, err := e.co.Get(e.ctx, "orders")
		return err != nil
	})
	if n := a.count(a.m.Errors, "orders", string(kindWALUnavailable)); n < 1 {
		t.Fatalf("wal-unavailable errors = %v, want the round that released the claim", n)
	}
	if n := a.count(a.m.ClaimChanges, "orders", EventLost); n != 0 {
		t.Fatalf("the claim was lost (%v), not released", n)
	}
	// Looks at the table keep failing on the silent WAL: no new claim.
	blocked := h.Blocked()
	waitFor(t, 20*time.Second, "more calls to reach the hung server", func() bool { return h.Blocked() >= blocked+3 })
	if ci, err := e.co.Get(e.ctx, "orders"); err == nil {
		t.Fatalf("claimed again while the WAL is silent: %+v", ci)
	}

	h.Resume()
	e.mustProduce("orders", 0, 2, 20)
	waitFor(t, 20*time.Second, "a to publish again", func() bool { return e.published("orders") })
	a.stop(t)
	e.exactlyOnce("orders")
	e.noClaims()
}
