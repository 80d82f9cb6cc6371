package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// AcquireOption adjusts one Acquire.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	ttl   time.Duration
	slice SlicePolicy
	// Test hooks: skip the busy hint (measure what an unhinted attempt
	// costs); act between the reservation read and the claim transaction.
	skipHint             bool
	afterReservationRead func()
}

// WithTTL sets the lease TTL of this claim (default Config.ClaimTTL).
func WithTTL(d time.Duration) AcquireOption { return func(o *acquireOptions) { o.ttl = d } }

// WithSlice bounds the claim's slice; see Claim.SliceOver.
func WithSlice(p SlicePolicy) AcquireOption { return func(o *acquireOptions) { o.slice = p } }

// Acquire takes table's claim for owner (DESIGN.md §3 rule 1):
//
//  1. It consults the busy hint (rule 2). A table hinted as claimed fails with
//     ErrClaimed, one hinted as reserved with ErrReserved (except for a
//     catch-up owner), before any lease grant, transaction or quorum read.
//  2. A catch-up owner reads the reservation (linearizable) and must find its
//     own Job id in it, else ErrReserved or ErrNotReserved.
//  3. It grants a lease of the claim's own and runs
//     If(CreateRevision(claim)==0, reservation absent — or, for catch-up,
//     unchanged since step 2) Then(Put(claim, record, WithLease(lease))).
//     On losing it revokes that lease and returns ErrClaimed or ErrReserved
//     naming the holder.
//
// On success the returned Claim keeps its lease alive until Release or loss.
//
// Cancellation and ambiguity (timeout, cancelled ctx, lost connection): a
// grant whose outcome is unknown leaves at most an unused lease that expires
// within the TTL. When the transaction's outcome is unknown, the granted
// lease is revoked with a fresh deadline before Acquire returns, which also
// deletes a claim the transaction may have written; if that revocation fails
// too, the lease and any claim on it expire within the TTL. Either way an
// error means the caller does not hold the table. A catch-up owner retries
// up to three times when the master rewrites its reservation meanwhile.
func (c *Client) Acquire(ctx context.Context, table string, owner Owner, opts ...AcquireOption) (*Claim, error) {
	if err := ValidateTable(table); err != nil {
		return nil, err
	}
	if err := owner.validate(); err != nil {
		return nil, err
	}
	o := acquireOptions{ttl: c.claimTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.skipHint {
		busy, reason, err := c.Busy(ctx, table)
		if err != nil {
			return nil, err
		}
		if busy && reason == ReasonClaimed {
			return nil, fmt.Errorf("table %s (busy hint): %w", table, ErrClaimed)
		}
		if busy && reason == ReasonReserved && owner.Kind != OwnerCatchup {
			return nil, fmt.Errorf("table %s (busy hint): %w", table, ErrReserved)
		}
	}

	// A catch-up owner pins the reservation by its ModRevision; if the
	// master rewrites it meanwhile (still for this Job), try again.
	for attempt := 1; ; attempt++ {
		cl, err := c.tryAcquire(ctx, table, owner, o)
		if errors.Is(err, errReservationMoved) && attempt < 3 {
			continue
		}
		return cl, err
	}
}

// errReservationMoved: the reservation still names the caller's Job but
// changed between the read and the claim transaction.
var errReservationMoved = fmt.Errorf("reservation changed during the claim attempt: %w", errs.ErrConflict)

func (c *Client) tryAcquire(ctx context.Context, table string, owner Owner, o acquireOptions) (*Claim, error) {
	ck, rk, sk := c.ClaimKey(table), c.ReservationKey(table), c.StopKey(table)
	// No owner of any kind claims a table a storage failure stopped
	// (rule 24).
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ck), "=", 0), clientv3.Compare(clientv3.CreateRevision(sk), "=", 0)}
	if owner.Kind == OwnerCatchup {
		cmp, err := c.reservedFor(ctx, table, owner.JobID)
		if err != nil {
			return nil, err
		}
		cmps = append(cmps, cmp)
		if o.afterReservationRead != nil {
			o.afterReservationRead()
		}
	} else {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(rk), "=", 0))
	}

	sent := c.clock.Now()
	cctx, cancel := c.callCtx(ctx)
	g, err := c.cli.Grant(cctx, ttlSeconds(o.ttl))
	cancel()
	if err != nil {
		return nil, c.unavailable(ctx, "grant claim lease for table "+table, err)
	}
	rec := claimRecord{
		header:     header{KindClaim, SchemaVersion},
		Table:      table,
		Owner:      owner,
		LeaseID:    int64(g.ID),
		TTLSeconds: g.TTL,
		AcquiredAt: sent.UTC(),
		Slice:      o.slice,
	}
	cctx, cancel = c.callCtx(ctx)
	resp, err := c.cli.Txn(cctx).
		If(cmps...).
		Then(clientv3.OpPut(ck, mustJSON(rec), clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(ck), clientv3.OpGet(rk), clientv3.OpGet(sk)).
		Commit()
	cancel()
	if err != nil {
		c.revokeLease(ctx, g.ID)
		return nil, c.unavailable(ctx, "claim transaction for table "+table+" (outcome unknown; its lease was revoked)", err)
	}
	if !resp.Succeeded {
		c.revokeLease(ctx, g.ID)
		return nil, c.lost(table, owner, resp)
	}
	ttl := time.Duration(g.TTL) * time.Second
	renewed, err := c.renewIfAged(ctx, table, g.ID, ttl, sent)
	if err != nil {
		c.revokeLease(ctx, g.ID)
		return nil, err
	}
	return c.startClaim(rec, ck, resp.Header.Revision, ttl, renewed), nil
}

// renewIfAged renews a new claim's lease at once when granting it and
// writing the claim took a third of the TTL or more — after an etcd
// restart the grant waits on the client's reconnect backoff, and the
// wall-time clock, started when the grant was sent, may have run out before
// the first scheduled renewal (issue 12 item 6). It returns the send time
// of the renewal, or sent when none was needed. On failure the caller gives
// the claim back: it was never handed out, so no epoch was advanced under it.
func (c *Client) renewIfAged(ctx context.Context, table string, id clientv3.LeaseID, ttl time.Duration, sent time.Time) (time.Time, error) {
	if c.since(sent) < ttl/3 {
		return sent, nil
	}
	now := c.clock.Now()
	cctx, cancel := c.callCtx(ctx)
	ka, err := c.cli.KeepAliveOnce(cctx, id)
	cancel()
	if err != nil {
		return sent, c.unavailable(ctx, "renew the lease of the new claim on table "+table+", aged by a slow grant (claim given back)", err)
	}
	if ka.TTL <= 0 {
		return sent, fmt.Errorf("table %s: the lease of the new claim expired before its first renewal (claim given back): %w", table, errs.ErrUnavailable)
	}
	return now, nil
}

// reservedFor reads table's reservation and returns the comparison that
// pins it, provided it names jobID.
func (c *Client) reservedFor(ctx context.Context, table, jobID string) (clientv3.Cmp, error) {
	rk := c.ReservationKey(table)
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Get(cctx, rk)
	cancel()
	if err != nil {
		return clientv3.Cmp{}, c.unavailable(ctx, "read reservation of table "+table, err)
	}
	if len(resp.Kvs) == 0 {
		return clientv3.Cmp{}, fmt.Errorf("table %s, catch-up job %s: %w", table, jobID, ErrNotReserved)
	}
	kv := resp.Kvs[0]
	r, err := decodeReservation(rk, kv.Value)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	if r.JobID != jobID {
		return clientv3.Cmp{}, fmt.Errorf("table %s is reserved for job %s, not %s: %w", table, r.JobID, jobID, ErrReserved)
	}
	return clientv3.Compare(clientv3.ModRevision(rk), "=", kv.ModRevision), nil
}

// lost explains a failed claim transaction from its Else reads.
func (c *Client) lost(table string, owner Owner, resp *clientv3.TxnResponse) error {
	ck, rk := c.ClaimKey(table), c.ReservationKey(table)
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		info, err := decodeStop(c.StopKey(table), kvs[0].Value, kvs[0].ModRevision)
		if err != nil {
			return err
		}
		return &StopError{Info: info}
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		rec, err := decodeClaim(ck, kvs[0].Value)
		if err != nil {
			return err
		}
		return fmt.Errorf("table %s is held by %s since %s (claim revision %d): %w",
			table, rec.Owner, rec.AcquiredAt.Format(time.RFC3339), kvs[0].CreateRevision, ErrClaimed)
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		// Only a catch-up owner compares a reservation that must exist.
		return fmt.Errorf("table %s, catch-up job %s: reservation withdrawn: %w", table, owner.JobID, ErrNotReserved)
	}
	r, err := decodeReservation(rk, kvs[0].Value)
	if err != nil {
		return err
	}
	if owner.Kind == OwnerCatchup && r.JobID == owner.JobID {
		return fmt.Errorf("table %s, catch-up job %s: %w", table, owner.JobID, errReservationMoved)
	}
	return fmt.Errorf("table %s is reserved for catch-up job %s: %w", table, r.JobID, ErrReserved)
}

// revokeLease revokes a lease with a fresh deadline even when ctx is done,
// so cleanup survives the caller's cancellation. A failure is left to TTL
// expiry.
func (c *Client) revokeLease(ctx context.Context, id clientv3.LeaseID) error {
	cctx, cancel := c.callCtx(context.WithoutCancel(ctx))
	defer cancel()
	_, err := c.cli.Revoke(cctx, id)
	return err
}

// ttlSeconds rounds a TTL up to whole seconds, at least 1 (etcd raises it
// further to its own minimum and says so in the grant response).
func ttlSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}
