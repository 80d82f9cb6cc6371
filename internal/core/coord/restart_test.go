package coord

import (
	"net"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/etcdembed"
)

// Issue 12 item 6: a claim acquired across an etcd restart keeps its lease.
// etcd is stopped, the claim's lease grant is sent while it is down (the
// busy hint skipped, so the grant is the first call to wait), and etcd is
// restarted on the same directory and port more than a TTL later. The grant
// succeeds once the client has reconnected, so on the wall-time clock —
// started when the grant was sent — the lease is already older than its TTL.
// The claim must be renewed at once rather than TTL/3 later: it is valid
// when handed out and stays held over several TTLs.
func TestClaimAcquiredAcrossEtcdRestart(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := func() *etcdembed.Server {
		s, err := etcdembed.Start(ctx, etcdembed.Options{Dir: dir, ClientAddr: addr})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e := start()
	t.Cleanup(func() { e.Close() })
	const ttl = 2 * time.Second
	c := newClient(t, testPrefix(t), Config{Endpoints: []string{"http://" + addr}, ClaimTTL: ttl, CallTimeout: 20 * time.Second})
	if _, _, err := c.Busy(ctx, "t"); err != nil { // connected once
		t.Fatal(err)
	}

	e.Close()
	type result struct {
		cl  *Claim
		err error
	}
	got := make(chan result, 1)
	go func() {
		cl, err := c.Acquire(ctx, "t", worker("w"), func(o *acquireOptions) { o.skipHint = true })
		got <- result{cl, err}
	}()
	time.Sleep(ttl + time.Second) // the grant waits on the dead etcd
	e = start()

	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire across the restart: %v", r.err)
	}
	cl := r.cl
	release(t, cl)
	if err := cl.Valid(ctx); err != nil {
		t.Fatalf("the claim is not valid when handed out: %v", err)
	}
	time.Sleep(2 * ttl)
	if err := cl.Err(); err != nil {
		t.Fatalf("the claim was lost after the restart: %v", err)
	}
	if err := cl.Valid(ctx); err != nil {
		t.Fatalf("Valid two TTLs later: %v", err)
	}
}
