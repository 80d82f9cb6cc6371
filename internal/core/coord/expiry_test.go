package coord

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Rule 1's wall-time rule, on a fake clock: a holder whose last successful
// keep-alive is older than the TTL stops acting although etcd still holds
// its lease and key.
func TestWallTimeExpiryBeforeEtcd(t *testing.T) {
	ctx := testCtx(t)
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	c := newClient(t, testPrefix(t), Config{Clock: fc, ClaimTTL: 30 * time.Second})
	cl, err := c.Acquire(ctx, "t", worker("w"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, cl)
	if cl.TTL() != 30*time.Second {
		t.Fatalf("TTL %s", cl.TTL())
	}
	waitWaiters(t, fc, 2) // renew and expiry timers armed

	// Renewals stop (a partition, a stalled process), time passes.
	cl.hooks.pauseKeepAlive.Store(true)
	fc.Step(29 * time.Second)
	if err := cl.Valid(ctx); err != nil {
		t.Fatalf("1s before the TTL the claim must still be valid: %v", err)
	}
	select {
	case <-cl.Done():
		t.Fatalf("Done before the TTL: %v", cl.Err())
	default:
	}

	fc.Step(time.Second)
	waitDone(t, cl, 5*time.Second)
	if !errors.Is(cl.Err(), ErrLeaseExpired) {
		t.Fatalf("reason: %v", cl.Err())
	}
	if err := cl.Valid(ctx); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Valid: %v", err)
	}
	if err := cl.SetEpoch(ctx, 1); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("SetEpoch: %v", err)
	}

	// etcd, on real time, has not expired anything: the holder stopped on
	// its own clock.
	ttl, err := c.Etcd().TimeToLive(ctx, cl.LeaseID())
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("etcd lease: %+v %v", ttl, err)
	}
	if info, err := c.Get(ctx, "t"); err != nil || info.CreateRevision != cl.CreateRevision() {
		t.Fatalf("etcd claim: %+v %v", info, err)
	}
	// Releasing a wall-time-expired claim still frees the table at once.
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "t"); !errors.Is(err, ErrNoClaim) {
		t.Fatalf("after release: %v", err)
	}
}

// With a working etcd, renewals keep a claim alive across many TTLs of
// fake time.
func TestKeepAliveRenews(t *testing.T) {
	ctx := testCtx(t)
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	c := newClient(t, testPrefix(t), Config{Clock: fc, ClaimTTL: 6 * time.Second})
	cl, err := c.Acquire(ctx, "t", worker("w"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, cl)
	for i := range 10 {
		waitWaiters(t, fc, 2)
		before := cl.age()
		fc.Step(cl.TTL() / 3)
		// Wait until the renewal sent at this step succeeded.
		deadline := time.Now().Add(5 * time.Second)
		for cl.age() >= before+cl.TTL()/3 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if err := cl.Valid(ctx); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// An abandoned claim (no renewals) is taken over only after etcd really
// expires its lease; the successor's attempts before that fail in etcd's
// own transaction, not just in the hint.
func TestAbandonedClaimNeedsRealExpiry(t *testing.T) {
	ctx := testCtx(t)
	prefix := testPrefix(t)
	a := newClient(t, prefix, Config{ClaimTTL: 2 * time.Second})
	b := newClient(t, prefix, Config{})
	old, err := a.Acquire(ctx, "t", worker("old"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, old)
	ttl := old.TTL()
	expiredBefore := scrape(t).MustSum(t, "etcd_debugging_server_lease_expired_total")

	old.hooks.pauseKeepAlive.Store(true)
	lastRenewal := time.Now().Add(-old.age()) // send time of the last successful renewal

	succ, attempts := takeover(t, b, old.Table(), old.CreateRevision())
	took := time.Since(lastRenewal)
	if took < ttl {
		t.Fatalf("successor acquired %s after the last renewal, before the TTL %s", took, ttl)
	}
	if attempts < 2 {
		t.Fatalf("only %d attempts: the refusal before expiry was not exercised", attempts)
	}
	if d := scrape(t).MustSum(t, "etcd_debugging_server_lease_expired_total") - expiredBefore; d < 1 {
		t.Fatalf("etcd expired %v leases: takeover without a real expiry", d)
	}
	if succ.CreateRevision() <= old.CreateRevision() {
		t.Fatalf("successor revision %d", succ.CreateRevision())
	}
	waitDone(t, old, time.Second)
	if !errors.Is(old.Err(), ErrLeaseExpired) && !errors.Is(old.Err(), ErrNotOwner) {
		t.Fatalf("old holder's reason: %v", old.Err())
	}
	old.hooks.skipLocalCheck.Store(true)
	if err := old.SetEpoch(ctx, 9); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("old holder SetEpoch after takeover: %v", err)
	}
	t.Logf("takeover %s after the last renewal (TTL %s), %d attempts refused", took.Round(time.Millisecond), ttl, attempts-1)
}

func TestSliceOver(t *testing.T) {
	ctx := testCtx(t)
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	c := newClient(t, testPrefix(t), Config{Clock: fc})
	for _, tc := range []struct {
		name    string
		policy  SlicePolicy
		rounds  int
		elapsed time.Duration
		want    bool
	}{
		{"unbounded", SlicePolicy{}, 1000, time.Hour, false},
		{"rounds left", SlicePolicy{MaxRounds: 3}, 2, 0, false},
		{"rounds used", SlicePolicy{MaxRounds: 3}, 3, 0, true},
		{"time left", SlicePolicy{MaxDuration: time.Minute}, 0, 59 * time.Second, false},
		{"time used", SlicePolicy{MaxDuration: time.Minute}, 0, time.Minute, true},
		{"either bound", SlicePolicy{MaxRounds: 10, MaxDuration: time.Minute}, 1, 2 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := c.Acquire(ctx, "t", worker("w"), WithSlice(tc.policy), WithTTL(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Release(ctx)
			fc.Step(tc.elapsed)
			if got := cl.SliceOver(tc.rounds); got != tc.want {
				t.Fatalf("SliceOver(%d) after %s = %v", tc.rounds, tc.elapsed, got)
			}
		})
	}
}

// takeover tries to acquire table until it succeeds: each attempt skips the
// hint, so etcd's own transaction refuses it while the old claim (revision
// oldRev) lives. Between attempts it waits for the old key's deletion, or
// 200ms.
func takeover(t *testing.T, c *Client, table string, oldRev int64) (*Claim, int) {
	t.Helper()
	ctx := testCtx(t)
	deleted := c.Etcd().Watch(ctx, c.ClaimKey(table), clientv3.WithRev(oldRev+1), clientv3.WithFilterPut())
	for attempts := 1; ; attempts++ {
		cl, err := c.Acquire(ctx, table, worker("successor"), func(o *acquireOptions) { o.skipHint = true })
		switch {
		case err == nil:
			release(t, cl)
			return cl, attempts
		case errors.Is(err, ErrClaimed):
			select {
			case <-deleted:
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				t.Fatal("the old claim never expired")
			}
		default:
			t.Fatal(err)
		}
	}
}

func waitWaiters(t *testing.T, fc *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for fc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("fake clock has %d waiters, want %d", fc.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Err and Valid agree on the wall-time rule (DESIGN.md §3 rule 1): once the
// last keep-alive is a TTL old, Err reports ErrLeaseExpired and closes Done
// by itself, without waiting for the keep-alive goroutine (none runs here).
func TestErrAppliesWallTimeRule(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	cl := &Claim{c: &Client{clock: fc}, table: "t", ttl: 10 * time.Second, lastKA: fc.Now(), done: make(chan struct{})}
	fc.Step(9 * time.Second)
	if err := cl.Err(); err != nil {
		t.Fatalf("1s before the TTL: %v", err)
	}
	fc.Step(time.Second)
	if err := cl.Err(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Err at the TTL: %v, want ErrLeaseExpired", err)
	}
	select {
	case <-cl.Done():
	default:
		t.Fatal("Err found the claim expired but Done is still open")
	}
	if err := cl.checkLocal(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("checkLocal (Valid's local half): %v", err)
	}
}

// suspendedClock is the real clock of a VM that was suspended for
// `suspended`: the wall clock moved on by that much, the monotonic clock
// (what Since measures) did not.
type suspendedClock struct {
	clock.RealClock
	suspended atomic.Int64
}

func (c *suspendedClock) Now() time.Time {
	return time.Now().Round(0).Add(time.Duration(c.suspended.Load()))
}

func (c *suspendedClock) Since(t time.Time) time.Duration {
	return c.Now().Sub(t) - time.Duration(c.suspended.Load())
}

// Issue 31: after a suspend longer than the TTL, etcd has expired the lease
// but the monotonic clock says the last keep-alive is fresh. The holder
// takes the larger of the monotonic and the wall-clock age and stops.
func TestSuspendedHolderStopsByWallClock(t *testing.T) {
	ctx := testCtx(t)
	clk := &suspendedClock{}
	c := newClient(t, testPrefix(t), Config{Clock: clk, ClaimTTL: 5 * time.Second})
	cl, err := c.Acquire(ctx, "t", worker("w"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, cl)
	if err := cl.Err(); err != nil {
		t.Fatal(err)
	}
	clk.suspended.Store(int64(time.Minute))
	if err := cl.Err(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("holder after a one-minute suspend: %v; want ErrLeaseExpired", err)
	}
}
