package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Rule 1: of concurrent acquirers exactly one wins; every loser's own lease
// is revoked.
func TestAcquireRaceOneWinnerLosersRevoke(t *testing.T) {
	ctx := testCtx(t)
	prefix := testPrefix(t)
	const n = 6
	clients := make([]*Client, n)
	for i := range clients {
		clients[i] = newClient(t, prefix, Config{})
	}
	before := leases(t, clients[0].Etcd())

	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		claims = make([]*Claim, n)
		errsOf = make([]error, n)
	)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// skipHint: every contender really grants a lease and runs the
			// transaction, so the race is decided by etcd alone.
			claims[i], errsOf[i] = clients[i].Acquire(ctx, "t1", worker(fmt.Sprint("w", i)), func(o *acquireOptions) { o.skipHint = true })
		}()
	}
	close(start)
	wg.Wait()

	var winner *Claim
	for i := range n {
		switch {
		case errsOf[i] == nil:
			if winner != nil {
				t.Fatalf("two winners: %s and %s", winner.Owner().ID, claims[i].Owner().ID)
			}
			winner = claims[i]
			release(t, winner)
		case errors.Is(errsOf[i], ErrClaimed) && errors.Is(errsOf[i], errs.ErrConflict):
		default:
			t.Fatalf("contender %d: %v", i, errsOf[i])
		}
	}
	if winner == nil {
		t.Fatal("no winner")
	}
	after := leases(t, clients[0].Etcd())
	for id := range after {
		if !before[id] && id != winner.LeaseID() {
			t.Errorf("lease %x left behind by a losing contender", id)
		}
	}
	if !after[winner.LeaseID()] {
		t.Errorf("winner's lease %x missing", winner.LeaseID())
	}
	info, err := clients[0].Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner.ID != winner.Owner().ID || info.CreateRevision != winner.CreateRevision() || info.LeaseID != winner.LeaseID() {
		t.Fatalf("claim record %+v does not match winner %s rev %d", info, winner.Owner().ID, winner.CreateRevision())
	}
	if err := winner.Valid(ctx); err != nil {
		t.Fatal(err)
	}

	if err := winner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[0].Get(ctx, "t1"); !errors.Is(err, ErrNoClaim) || !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("after release: %v", err)
	}
	if leases(t, clients[0].Etcd())[winner.LeaseID()] {
		t.Fatal("release left the lease")
	}
	if !errors.Is(winner.Err(), ErrReleased) {
		t.Fatalf("Err after release: %v", winner.Err())
	}
}

// Rule 14: ordinary claims exclude reserved tables; the catch-up executor
// claims only with the exact Job id. Both the hinted and the unhinted path
// must refuse.
func TestReservedTable(t *testing.T) {
	ctx := testCtx(t)
	prefix := testPrefix(t)
	c := newClient(t, prefix, Config{})
	hinted := newClient(t, prefix, Config{})
	for _, table := range []string{"res", "res2"} {
		v, _ := MarshalReservation(Reservation{Table: table, JobID: "job-a"})
		if _, err := c.Etcd().Put(ctx, c.ReservationKey(table), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hinted.StartHint(ctx); err != nil {
		t.Fatal(err)
	}
	catchup := func(job string) Owner { return Owner{ID: "x-" + job, Kind: OwnerCatchup, JobID: job} }
	noHint := func(o *acquireOptions) { o.skipHint = true }

	for _, tc := range []struct {
		name   string
		client *Client
		table  string
		owner  Owner
		opts   []AcquireOption
		want   error // nil: acquires
	}{
		{"worker refused by hint", hinted, "res", worker("w"), nil, ErrReserved},
		{"worker refused by serializable probe", c, "res", worker("w"), nil, ErrReserved},
		{"worker refused by transaction", c, "res", worker("w"), []AcquireOption{noHint}, ErrReserved},
		{"cli refused", c, "res", Owner{ID: "op", Kind: OwnerCLI}, nil, ErrReserved},
		{"catch-up with another job", hinted, "res", catchup("job-b"), nil, ErrReserved},
		{"catch-up on unreserved table", c, "free", catchup("job-a"), nil, ErrNotReserved},
		{"catch-up with the exact job", hinted, "res", catchup("job-a"), nil, nil},
		{"catch-up exact job, unhinted", c, "res2", catchup("job-a"), []AcquireOption{noHint}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := leases(t, c.Etcd())
			cl, err := tc.client.Acquire(ctx, tc.table, tc.owner, tc.opts...)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Release(ctx)
				if cl.Owner().JobID != tc.owner.JobID {
					t.Fatalf("claim owner %+v", cl.Owner())
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == ErrReserved && tc.owner.Kind == OwnerCatchup && !strings.Contains(err.Error(), "job-a") {
				t.Errorf("error does not name the reserving job: %v", err)
			}
			for id := range leases(t, c.Etcd()) {
				if !before[id] {
					t.Errorf("refused acquire left lease %x", id)
				}
			}
		})
	}
}

// Revocation by an operator: the holder stops at once, validation fails, a
// successor acquires with a new CreateRevision, and the old holder can no
// longer write an epoch (the guard, not just its own bookkeeping, refuses).
func TestRevokeByOperator(t *testing.T) {
	ctx := testCtx(t)
	prefix := testPrefix(t)
	a := newClient(t, prefix, Config{})
	b := newClient(t, prefix, Config{})
	op := newClient(t, prefix, Config{})

	old, err := a.Acquire(ctx, "t", worker("old"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, old)
	work, stopWork := old.Context(ctx)
	defer stopWork()
	if err := old.SetEpoch(ctx, 5); err != nil {
		t.Fatal(err)
	}
	info, err := op.Get(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 5 || info.Owner.ID != "old" || info.TTLLeft <= 0 || info.LeaseID != old.LeaseID() {
		t.Fatalf("inspect: %+v", info)
	}

	if _, err := op.Revoke(ctx, RevokeRequest{Table: "t", ExpectCreateRevision: old.CreateRevision() + 1000, Actor: "alice"}); !errors.Is(err, ErrClaimChanged) {
		t.Fatalf("revoke with a stale expectation: %v", err)
	}
	if _, err := op.Revoke(ctx, RevokeRequest{Table: "t", Actor: ""}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("revoke without actor: %v", err)
	}
	res, err := op.Revoke(ctx, RevokeRequest{Table: "t", ExpectCreateRevision: old.CreateRevision(), Reason: "stuck", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Claim.CreateRevision != old.CreateRevision() || res.Claim.Epoch != 5 {
		t.Fatalf("revoke result %+v", res)
	}

	waitDone(t, old, 5*time.Second)
	if !errors.Is(old.Err(), ErrNotOwner) {
		t.Fatalf("holder's reason: %v", old.Err())
	}
	if err := context.Cause(work); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("claim-bound context: %v", err)
	}
	if err := old.Valid(ctx); !errors.Is(err, ErrNotOwner) || !errors.Is(err, errs.ErrFenced) {
		t.Fatalf("Valid after revoke: %v", err)
	}
	if leases(t, op.Etcd())[old.LeaseID()] {
		t.Fatal("revoked claim's lease still exists")
	}
	if _, err := op.Revoke(ctx, RevokeRequest{Table: "t", Actor: "alice"}); !errors.Is(err, ErrNoClaim) || !strings.Contains(err.Error(), "table t") {
		t.Fatalf("revoking an absent claim: %v", err)
	}

	// The audit record was written in the same transaction.
	ar, err := op.Etcd().Get(ctx, res.AuditKey)
	if err != nil || len(ar.Kvs) != 1 || ar.Kvs[0].ModRevision != res.Revision {
		t.Fatalf("audit record %s: %v %v", res.AuditKey, ar, err)
	}
	var rec auditRecord
	if err := decodeRecord(res.AuditKey, ar.Kvs[0].Value, KindAudit, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Actor != "alice" || rec.Reason != "stuck" || rec.Claim.Owner.ID != "old" {
		t.Fatalf("audit record %+v", rec)
	}
	// Audit reads it back, filtered by table.
	hist, err := op.Audit(ctx, "t")
	if err != nil || len(hist) != 1 || hist[0].Key != res.AuditKey || hist[0].Actor != "alice" || hist[0].Action != rec.Action {
		t.Fatalf("audit history %+v %v", hist, err)
	}
	if other, err := op.Audit(ctx, "u"); err != nil || len(other) != 0 {
		t.Fatalf("audit history of another table %+v %v", other, err)
	}

	succ, err := b.Acquire(ctx, "t", worker("new"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, succ)
	if succ.CreateRevision() <= old.CreateRevision() {
		t.Fatalf("successor revision %d not after %d", succ.CreateRevision(), old.CreateRevision())
	}
	if err := succ.SetEpoch(ctx, 6); err != nil {
		t.Fatal(err)
	}

	// The old holder's epoch write is refused by its own bookkeeping…
	if err := old.SetEpoch(ctx, 7); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("old holder SetEpoch: %v", err)
	}
	// …and, were it unaware of the revocation, by etcd's guard.
	old.hooks.skipLocalCheck.Store(true)
	if err := old.SetEpoch(ctx, 7); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("old holder SetEpoch past local checks: %v", err)
	}
	if err := old.Valid(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("old holder Valid past local checks: %v", err)
	}
	// A hand-made transaction carrying the old IsOwner fails too.
	if resp, err := a.Etcd().Txn(ctx).If(old.IsOwner()).Then(clientv3.OpPut(succ.Key(), "x")).Commit(); err != nil || resp.Succeeded {
		t.Fatalf("old IsOwner guard: %v %v", resp, err)
	}
	info, err = op.Get(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 6 || info.Owner.ID != "new" || info.CreateRevision != succ.CreateRevision() {
		t.Fatalf("successor's claim changed: %+v", info)
	}
	if err := succ.Valid(ctx); err != nil {
		t.Fatal(err)
	}
	if err := succ.SetEpoch(ctx, 5); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("lower epoch: %v", err)
	}
}

func TestListAndInspect(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, testPrefix(t), Config{})
	for _, table := range []string{"b", "a"} {
		cl, err := c.Acquire(ctx, table, worker("w-"+table), WithTTL(20*time.Second), WithSlice(SlicePolicy{MaxRounds: 3}))
		if err != nil {
			t.Fatal(err)
		}
		release(t, cl)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Table != "a" || list[1].Table != "b" {
		t.Fatalf("list: %+v", list)
	}
	for _, ci := range list {
		if ci.Owner.ID != "w-"+ci.Table || ci.LeaseTTL != 20*time.Second || ci.TTLLeft <= 0 || ci.TTLLeft > 20*time.Second ||
			ci.Slice.MaxRounds != 3 || ci.HeldSince.IsZero() || ci.CreateRevision == 0 {
			t.Errorf("claim info %+v", ci)
		}
	}
	if _, err := c.Get(ctx, "nope"); !errors.Is(err, ErrNoClaim) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("Get absent: %v", err)
	}
	if _, err := c.Get(ctx, "../x"); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Get bad name: %v", err)
	}
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		table string
		owner Owner
	}{
		{"", worker("w")},
		{"a/b", worker("w")},
		{"-x", worker("w")},
		{strings.Repeat("x", wal.MaxNameLen+1), worker("w")},
		{"ok", Owner{Kind: OwnerWorker}},
		{"ok", Owner{ID: "x", Kind: "daemon"}},
		{"ok", Owner{ID: "x", Kind: OwnerCatchup}},
	} {
		// No etcd is needed: validation fails before any call.
		c := &Client{}
		if _, err := c.Acquire(context.Background(), tc.table, tc.owner); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Acquire(%q, %+v) = %v, want ErrInvalid", tc.table, tc.owner, err)
		}
	}
}

// The catch-up executor pins the reservation it read: a reservation
// rewritten for the same Job is retried, one handed to another Job or
// withdrawn before the transaction refuses the claim.
func TestCatchupReservationChangesDuringAcquire(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, testPrefix(t), Config{})
	put := func(job string) {
		v, _ := MarshalReservation(Reservation{Table: "t", JobID: job})
		if _, err := c.Etcd().Put(ctx, c.ReservationKey("t"), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   error
	}{
		{"rewritten for the same job", func() { put("job-a") }, nil},
		{"handed to another job", func() { put("job-b") }, ErrReserved},
		{"withdrawn", func() { c.Etcd().Delete(ctx, c.ReservationKey("t")) }, ErrNotReserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put("job-a")
			calls := 0
			hook := func(o *acquireOptions) {
				o.afterReservationRead = func() {
					if calls++; calls == 1 {
						tc.change()
					}
				}
			}
			cl, err := c.Acquire(ctx, "t", Owner{ID: "x", Kind: OwnerCatchup, JobID: "job-a"}, hook)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				cl.Release(ctx)
				if calls != 2 {
					t.Fatalf("%d attempts, want 2", calls)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
