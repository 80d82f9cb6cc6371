package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// Claim is a held claim on one table: the ownership record, its lease, and
// the goroutine that keeps the lease alive. Like concurrency.Session, it
// exposes Done; like concurrency.Mutex, IsOwner gives a comparison for the
// holder's own transactions. Its CreateRevision is the claim's identity.
//
// The holder must stop acting for the table when Done is closed. Err then
// says why: ErrLeaseExpired (etcd lost the lease, or no keep-alive
// succeeded for a whole TTL — the wall-time rule, honoured even before etcd
// expires the lease), ErrNotOwner (the key was revoked or replaced) or
// ErrReleased.
//
// Rule 3, epoch before claim, is the caller's sequence: read the WAL epoch
// e, Valid, CAS the WAL epoch e→e+1, then SetEpoch(e+1).
type Claim struct {
	c          *Client
	table, key string
	owner      Owner
	lease      clientv3.LeaseID
	rev        int64
	ttl        time.Duration
	acquiredAt time.Time
	slice      SlicePolicy

	ctx    context.Context // cancelled by Release: aborts an in-flight keep-alive
	cancel context.CancelFunc
	stop   chan struct{}
	exited chan struct{}
	done   chan struct{}
	once   sync.Once

	epochMu sync.Mutex // serialises SetEpoch; guards record
	record  claimRecord

	mu     sync.Mutex
	lastKA time.Time // send time of the last successful keep-alive (or grant)
	err    error

	hooks testHooks
}

// testHooks let tests simulate a holder that has stopped renewing (a
// partition, a stalled process) or that has not yet noticed its loss.
type testHooks struct {
	pauseKeepAlive atomic.Bool // renewals are skipped while set
	skipLocalCheck atomic.Bool // checkLocal trusts the holder blindly
}

func (c *Client) startClaim(rec claimRecord, key string, rev int64, ttl time.Duration, granted time.Time) *Claim {
	cl := &Claim{
		c: c, table: rec.Table, key: key, owner: rec.Owner,
		lease: clientv3.LeaseID(rec.LeaseID), rev: rev, ttl: ttl,
		acquiredAt: rec.AcquiredAt, slice: rec.Slice, record: rec,
		stop: make(chan struct{}), exited: make(chan struct{}), done: make(chan struct{}),
		lastKA: granted,
	}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	go cl.run(rev)
	return cl
}

// watch follows the claim key from just after revision seen, so a
// revocation or replacement is seen at once rather than at the next
// keep-alive. It requires a leader: a member cut off from the quorum ends
// the watch instead of leaving it silent.
func (cl *Claim) watch(seen int64) clientv3.WatchChan {
	return cl.c.cli.Watch(clientv3.WithRequireLeader(cl.ctx), cl.key, clientv3.WithRev(seen+1))
}

// Table is the claimed table.
func (cl *Claim) Table() string { return cl.table }

// Key is the claim's etcd key.
func (cl *Claim) Key() string { return cl.key }

// Owner is the holder named in the claim.
func (cl *Claim) Owner() Owner { return cl.owner }

// LeaseID is the claim's own lease.
func (cl *Claim) LeaseID() clientv3.LeaseID { return cl.lease }

// CreateRevision is the claim's identity and token.
func (cl *Claim) CreateRevision() int64 { return cl.rev }

// TTL is the lease TTL granted by etcd.
func (cl *Claim) TTL() time.Duration { return cl.ttl }

// AcquiredAt is when the claim's lease was requested (injected clock).
func (cl *Claim) AcquiredAt() time.Time { return cl.acquiredAt }

// Epoch is the publisher epoch last recorded by SetEpoch, 0 before.
func (cl *Claim) Epoch() uint64 {
	cl.epochMu.Lock()
	defer cl.epochMu.Unlock()
	return cl.record.Epoch
}

// Done is closed when the claim is lost or released.
func (cl *Claim) Done() <-chan struct{} { return cl.done }

// Err is nil while the claim is held and afterwards says why it ended. It
// applies the wall-time rule as Valid does (DESIGN.md §3 rule 1): once the
// last successful keep-alive is a TTL old, Err is ErrLeaseExpired and Done
// is closed, even if the keep-alive goroutine has not noticed yet.
func (cl *Claim) Err() error {
	cl.mu.Lock()
	err, last := cl.err, cl.lastKA
	cl.mu.Unlock()
	if err != nil || cl.hooks.skipLocalCheck.Load() {
		return err
	}
	if age := cl.c.since(last); age >= cl.ttl {
		return cl.lose(cl.wallTimeExpired(age))
	}
	return nil
}

// Context returns a context derived from parent that is cancelled, with
// Err as its cause, when the claim ends: work bound to the claim stops with
// it. Call the CancelFunc when that work is finished.
func (cl *Claim) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-cl.done:
			cancel(cl.Err())
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// IsOwner is the comparison that holds only while this claim exists, for
// the holder's own transactions (like concurrency.Mutex.IsOwner).
func (cl *Claim) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(cl.key), "=", cl.rev)
}

// SliceOver reports whether the claim's slice is used up after rounds
// completed rounds, or by time on the injected clock. The holder then
// releases the claim.
func (cl *Claim) SliceOver(rounds int) bool {
	if cl.slice.MaxRounds > 0 && rounds >= cl.slice.MaxRounds {
		return true
	}
	return cl.slice.MaxDuration > 0 && cl.c.since(cl.acquiredAt) >= cl.slice.MaxDuration
}

// Valid checks, with a linearizable read, that the claim key still exists
// with this claim's CreateRevision, lease and owner, and that the wall-time
// rule has not expired it. It returns nil, ErrLeaseExpired, ErrNotOwner
// (after which Done is closed), or, when etcd cannot answer in time or ctx
// ends, an ErrUnavailable or context error that proves nothing either way:
// the holder must not act on it.
func (cl *Claim) Valid(ctx context.Context) error {
	if err := cl.checkLocal(); err != nil {
		return err
	}
	// One linearizable read of the claim and of the table's storage stop.
	sk := cl.c.StopKey(cl.table)
	cctx, cancel := cl.c.callCtx(ctx)
	tr, err := cl.c.cli.Txn(cctx).Then(clientv3.OpGet(cl.key), clientv3.OpGet(sk)).Commit()
	cancel()
	if err != nil {
		return cl.c.unavailable(ctx, "validate claim on table "+cl.table, err)
	}
	if kvs := tr.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		info, err := decodeStop(sk, kvs[0].Value, kvs[0].ModRevision)
		if err != nil {
			return err
		}
		return &StopError{Info: info}
	}
	resp := tr.Responses[0].GetResponseRange()
	if len(resp.Kvs) == 0 {
		return cl.lose(fmt.Errorf("table %s: claim revision %d is gone: %w", cl.table, cl.rev, ErrNotOwner))
	}
	kv := resp.Kvs[0]
	if kv.CreateRevision != cl.rev || clientv3.LeaseID(kv.Lease) != cl.lease {
		return cl.lose(fmt.Errorf("table %s: claim is now revision %d lease %x, this holder has revision %d lease %x: %w",
			cl.table, kv.CreateRevision, kv.Lease, cl.rev, cl.lease, ErrNotOwner))
	}
	rec, err := decodeClaim(cl.key, kv.Value)
	if err != nil {
		return err
	}
	if rec.Owner.ID != cl.owner.ID {
		return cl.lose(fmt.Errorf("table %s: claim names owner %s, not %s: %w", cl.table, rec.Owner.ID, cl.owner.ID, ErrNotOwner))
	}
	// The read may have taken a while: apply the wall-time rule again.
	return cl.checkLocal()
}

// SetEpoch records the publisher epoch e in the claim (the last step of rule
// 3), in a transaction guarded by the claim's CreateRevision, so a holder
// whose claim was revoked or expired can never write into a successor's
// claim. It fails with ErrNotOwner when the guard fails, ErrStaleEpoch when
// e is lower than the recorded epoch, or the claim's Err after Done.
//
// Ambiguity: on an ErrUnavailable or context error the epoch may or may not
// be recorded; calling SetEpoch again with the same e is idempotent.
func (cl *Claim) SetEpoch(ctx context.Context, e uint64) error {
	if e == 0 {
		return fmt.Errorf("table %s: publisher epoch 0 cannot be recorded: %w", cl.table, errs.ErrInvalid)
	}
	if err := cl.checkLocal(); err != nil {
		return err
	}
	cl.epochMu.Lock()
	defer cl.epochMu.Unlock()
	if e < cl.record.Epoch {
		return fmt.Errorf("table %s: epoch %d is below the claim's recorded epoch %d: %w", cl.table, e, cl.record.Epoch, ErrStaleEpoch)
	}
	rec := cl.record
	rec.Epoch = e
	cctx, cancel := cl.c.callCtx(ctx)
	resp, err := cl.c.cli.Txn(cctx).
		If(cl.IsOwner()).
		Then(clientv3.OpPut(cl.key, mustJSON(rec), clientv3.WithIgnoreLease())).
		Commit()
	cancel()
	if err != nil {
		return cl.c.unavailable(ctx, fmt.Sprintf("record epoch %d in claim on table %s (outcome unknown)", e, cl.table), err)
	}
	if !resp.Succeeded {
		return cl.lose(fmt.Errorf("table %s: epoch %d not recorded, claim revision %d is gone: %w", cl.table, e, cl.rev, ErrNotOwner))
	}
	cl.record = rec
	return nil
}

// Release stops the keep-alives and revokes the claim's lease, which deletes
// the claim key. It revokes even if ctx is already cancelled (bounded by
// Config.CallTimeout), so shutdown paths release their claims. A lease etcd
// no longer knows is not an error. If etcd cannot be reached the error wraps
// errs.ErrUnavailable and the claim expires within its TTL. Done is closed
// when Release returns; calling it again is harmless.
func (cl *Claim) Release(ctx context.Context) error {
	cl.once.Do(func() {
		close(cl.stop)
		cl.cancel()
	})
	<-cl.exited
	cl.lose(fmt.Errorf("table %s: %w", cl.table, ErrReleased))
	err := cl.c.revokeLease(ctx, cl.lease)
	if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return cl.c.unavailable(context.WithoutCancel(ctx),
		fmt.Sprintf("release claim on table %s (lease %x expires within %s)", cl.table, cl.lease, cl.ttl), err)
}

// lose records err as the reason the claim ended, unless one is already
// recorded, closes Done, and returns err: a caller reports what it found,
// Err keeps the first reason.
func (cl *Claim) lose(err error) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err == nil {
		cl.err = err
		close(cl.done)
	}
	return err
}

// checkLocal applies what the holder knows without asking etcd: Done, and
// the wall-time rule.
func (cl *Claim) checkLocal() error {
	if cl.hooks.skipLocalCheck.Load() {
		return nil
	}
	return cl.Err()
}

func (cl *Claim) wallTimeExpired(age time.Duration) error {
	return fmt.Errorf("table %s: last successful keep-alive of lease %x was %s ago, TTL %s: %w",
		cl.table, cl.lease, age.Round(time.Millisecond), cl.ttl, ErrLeaseExpired)
}
