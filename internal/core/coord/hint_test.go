package coord

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// Rule 2, measured on the etcd server: polling a busy table costs etcd no
// lease grant, no transaction, no proposal and — with the watch hint — no
// request at all. The positive control shows the same measurement sees a
// single unhinted attempt.
func TestBusyPollingCostsEtcdNothing(t *testing.T) {
	const polls = 200
	for _, mode := range []string{"watch hint", "serializable probe"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testCtx(t)
			prefix := testPrefix(t)
			holder := newClient(t, prefix, Config{ClaimTTL: time.Minute})
			// etcd's metrics cannot tell a serializable read from a
			// linearizable one, so the poller's connection also counts, on
			// the wire, every Range request that asks for linearizability.
			var linearizable atomic.Int64
			poller := newClientWith(t, prefix, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if r, ok := req.(*etcdserverpb.RangeRequest); ok && !r.Serializable {
					linearizable.Add(1)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}))
			held, err := holder.Acquire(ctx, "busy", worker("holder"))
			if err != nil {
				t.Fatal(err)
			}
			release(t, held)
			// The holder's renewals are server work too; hold them off so
			// that the window measures the poller alone.
			held.hooks.pauseKeepAlive.Store(true)
			if mode == "watch hint" {
				h, err := poller.StartHint(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if busy, why := h.Busy("busy"); !busy || why != ReasonClaimed {
					t.Fatalf("hint after load: %v %q", busy, why)
				}
			}

			before := scrape(t)
			for i := range polls {
				if _, err := poller.Acquire(ctx, "busy", worker("poller")); !errors.Is(err, ErrClaimed) {
					t.Fatalf("poll %d: %v", i, err)
				}
			}
			after := scrape(t)

			d := func(name string, labels ...string) float64 {
				return after.MustSum(t, name, labels...) - before.MustSum(t, name, labels...)
			}
			deltas := []struct {
				what string
				got  float64
			}{
				{"proposals committed", d("etcd_server_proposals_committed_total")},
				{"proposals applied", d("etcd_server_proposals_applied_total")},
				{"mvcc transactions", d("etcd_mvcc_txn_total")},
				{"mvcc puts", d("etcd_mvcc_put_total")},
				{"mvcc deletes", d("etcd_mvcc_delete_total")},
				{"LeaseGrant RPCs", d("grpc_server_handled_total", `grpc_method="LeaseGrant"`)},
				{"LeaseRevoke RPCs", d("grpc_server_handled_total", `grpc_method="LeaseRevoke"`)},
				{"Txn RPCs", d("grpc_server_handled_total", `grpc_method="Txn"`)},
				{"failed read indexes", d("etcd_server_read_indexes_failed_total")},
				{"slow read indexes", d("etcd_server_slow_read_indexes_total")},
			}
			if n := linearizable.Load(); n != 0 {
				t.Errorf("%d polls sent %d linearizable Range requests", polls, n)
			}
			ranges := d("grpc_server_handled_total", `grpc_method="Range"`)
			unary := d("grpc_server_handled_total", `grpc_type="unary"`)
			for _, x := range deltas {
				t.Logf("%s: %v", x.what, x.got)
				if x.got != 0 {
					t.Errorf("%d polls of a busy table cost %v %s", polls, x.got, x.what)
				}
			}
			t.Logf("Range RPCs: %v, all unary RPCs: %v", ranges, unary)
			switch mode {
			case "watch hint":
				// No request at all: in particular no read, linearizable
				// or not, reached the server.
				if unary != 0 {
					t.Errorf("watch-hinted polls made %v unary RPCs", unary)
				}
			case "serializable probe":
				// One keys-only count read per poll (the claim key answers
				// first), issued WithSerializable: served by the member
				// from its local store, without a read index.
				if ranges != polls || unary != polls {
					t.Errorf("serializable polls made %v Range / %v unary RPCs, want %d", ranges, unary, polls)
				}
			}

			// Positive control: one attempt that skips the hint costs a
			// grant, a transaction and a revoke, and the metrics show it.
			before = scrape(t)
			if _, err := poller.Acquire(ctx, "busy", worker("poller"), func(o *acquireOptions) { o.skipHint = true }); !errors.Is(err, ErrClaimed) {
				t.Fatalf("unhinted attempt: %v", err)
			}
			after = scrape(t)
			for _, x := range []struct {
				what string
				got  float64
				min  float64
			}{
				{"proposals committed", d("etcd_server_proposals_committed_total"), 3},
				{"mvcc transactions", d("etcd_mvcc_txn_total"), 1},
				{"LeaseGrant RPCs", d("grpc_server_handled_total", `grpc_method="LeaseGrant"`), 1},
				{"Txn RPCs", d("grpc_server_handled_total", `grpc_method="Txn"`), 1},
				{"LeaseRevoke RPCs", d("grpc_server_handled_total", `grpc_method="LeaseRevoke"`), 1},
			} {
				t.Logf("control, %s: %v", x.what, x.got)
				if x.got < x.min {
					t.Errorf("control attempt: %s %v, want at least %v: the measurement is blind", x.what, x.got, x.min)
				}
			}
		})
	}
}

// The watch-maintained hint follows claims and reservations as they come
// and go, from one load and one watch stream.
func TestHintFollowsClaimsAndReservations(t *testing.T) {
	ctx := testCtx(t)
	prefix := testPrefix(t)
	c := newClient(t, prefix, Config{})
	other := newClient(t, prefix, Config{})
	pre, err := other.Acquire(ctx, "pre", worker("o"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, pre)
	h, err := c.StartHint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.StartHint(ctx); again != h {
		t.Fatal("second StartHint started another hint")
	}
	wait := func(rev int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for h.Revision() < rev {
			if time.Now().After(deadline) {
				t.Fatalf("hint at revision %d, want %d", h.Revision(), rev)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	check := func(table string, busy bool, why Reason) {
		t.Helper()
		if b, w := h.Busy(table); b != busy || w != why {
			t.Fatalf("Busy(%s) = %v %q, want %v %q", table, b, w, busy, why)
		}
	}
	check("pre", true, ReasonClaimed)
	check("t", false, "")

	cl, err := other.Acquire(ctx, "t", worker("o"))
	if err != nil {
		t.Fatal(err)
	}
	wait(cl.CreateRevision())
	check("t", true, ReasonClaimed)
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := MarshalReservation(Reservation{Table: "t", JobID: "j"})
	resp, err := other.Etcd().Put(ctx, other.ReservationKey("t"), string(v))
	if err != nil {
		t.Fatal(err)
	}
	wait(resp.Header.Revision)
	check("t", true, ReasonReserved)
	del, err := other.Etcd().Delete(ctx, other.ReservationKey("t"))
	if err != nil {
		t.Fatal(err)
	}
	wait(del.Header.Revision)
	check("t", false, "")
	if !h.Synced() {
		t.Fatal("hint not synced")
	}
	// Keys outside the two directories are ignored.
	if _, err := other.Etcd().Put(ctx, prefix+"/progress/t", "x"); err != nil {
		t.Fatal(err)
	}
	check("t", false, "")
}

// newClientWith builds a Client over an etcd client with extra dial options.
func newClientWith(t *testing.T, prefix string, opts ...grpc.DialOption) *Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, DialOptions: opts, Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	c, err := New(cli, Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
