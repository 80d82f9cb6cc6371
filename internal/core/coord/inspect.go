package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// ClaimInfo describes a claim for operators (`walctl claim inspect`). Its
// JSON shape is part of the CLI's documented output.
type ClaimInfo struct {
	Table    string           `json:"table"`
	Owner    Owner            `json:"owner"`
	LeaseID  clientv3.LeaseID `json:"lease_id"`
	LeaseTTL time.Duration    `json:"lease_ttl_ns"`
	// TTLLeft is the lease's remaining TTL as etcd reports it; -1 when etcd
	// no longer knows the lease (it is being expired).
	TTLLeft        time.Duration `json:"ttl_left_ns"`
	Epoch          uint64        `json:"epoch"`
	HeldSince      time.Time     `json:"held_since"`
	Slice          SlicePolicy   `json:"slice"`
	CreateRevision int64         `json:"create_revision"`
	ModRevision    int64         `json:"mod_revision"`
}

// Get returns table's claim, read linearizably, with the lease's remaining
// TTL. An absent claim is ErrNoClaim naming the table; an unknown record
// kind or version is ErrUnknownRecord. Errors from etcd wrap
// errs.ErrUnavailable; cancellation returns ctx's error. Read-only.
func (c *Client) Get(ctx context.Context, table string) (ClaimInfo, error) {
	if err := ValidateTable(table); err != nil {
		return ClaimInfo{}, err
	}
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Get(cctx, c.ClaimKey(table))
	cancel()
	if err != nil {
		return ClaimInfo{}, c.unavailable(ctx, "read claim of table "+table, err)
	}
	if len(resp.Kvs) == 0 {
		return ClaimInfo{}, fmt.Errorf("table %s: %w", table, ErrNoClaim)
	}
	return c.info(ctx, resp.Kvs[0])
}

// List returns every claim, sorted by table, read linearizably, each with
// its lease's remaining TTL (one LeaseTimeToLive per claim). It fails as a
// whole on the first unknown record or etcd error; it is read-only.
func (c *Client) List(ctx context.Context) ([]ClaimInfo, error) {
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Get(cctx, c.claimsDir(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	cancel()
	if err != nil {
		return nil, c.unavailable(ctx, "list claims", err)
	}
	out := make([]ClaimInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ci, err := c.info(ctx, kv)
		if err != nil {
			return nil, err
		}
		out = append(out, ci)
	}
	return out, nil
}

func (c *Client) info(ctx context.Context, kv *mvccpb.KeyValue) (ClaimInfo, error) {
	rec, err := decodeClaim(string(kv.Key), kv.Value)
	if err != nil {
		return ClaimInfo{}, err
	}
	ci := ClaimInfo{
		Table:          strings.TrimPrefix(string(kv.Key), c.claimsDir()),
		Owner:          rec.Owner,
		LeaseID:        clientv3.LeaseID(kv.Lease),
		LeaseTTL:       time.Duration(rec.TTLSeconds) * time.Second,
		TTLLeft:        -1,
		Epoch:          rec.Epoch,
		HeldSince:      rec.AcquiredAt,
		Slice:          rec.Slice,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
	}
	if kv.Lease == 0 {
		return ci, nil
	}
	cctx, cancel := c.callCtx(ctx)
	ttl, err := c.cli.TimeToLive(cctx, clientv3.LeaseID(kv.Lease))
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
	case err != nil:
		return ClaimInfo{}, c.unavailable(ctx, "read lease of table "+ci.Table, err)
	case ttl.TTL >= 0:
		ci.TTLLeft = time.Duration(ttl.TTL) * time.Second
	}
	return ci, nil
}

// RevokeRequest is an operator's revocation of a claim.
type RevokeRequest struct {
	Table string
	// ExpectCreateRevision, when non-zero, is the claim the operator saw
	// (from inspect); a different claim is left alone with ErrClaimChanged.
	ExpectCreateRevision int64
	Reason               string
	Actor                string
}

// RevokeResult reports a revocation.
type RevokeResult struct {
	// Claim is the revoked claim as it was.
	Claim ClaimInfo `json:"claim"`
	// AuditKey is the audit record written in the same transaction.
	AuditKey string `json:"audit_key"`
	// Revision is the etcd revision of the deletion.
	Revision int64 `json:"revision"`
}

// Revoke deletes table's claim and writes an audit record in one
// transaction guarded by the claim's CreateRevision, then revokes the
// claim's lease. The holder sees the deletion on its watch and stops (Done);
// its later guarded writes fail. The publisher epoch is not touched: the
// next claimant fences.
//
// An absent claim is ErrNoClaim naming the table; a claim other than
// ExpectCreateRevision, or one replaced between the read and the
// transaction, is ErrClaimChanged and nothing is written. If the
// transaction succeeded but the lease revocation failed, the result is
// returned with an error wrapping errs.ErrUnavailable: the claim is gone
// and the lease expires within its TTL.
//
// Ambiguity: if the transaction's outcome is unknown (timeout, cancelled
// ctx), Get tells: ErrNoClaim or a new CreateRevision means it happened
// (or the holder left); the audit directory holds the record if it did.
func (c *Client) Revoke(ctx context.Context, req RevokeRequest) (RevokeResult, error) {
	if err := ValidateTable(req.Table); err != nil {
		return RevokeResult{}, err
	}
	if req.Actor == "" {
		return RevokeResult{}, fmt.Errorf("revoke claim on table %s: no actor named: %w", req.Table, errs.ErrInvalid)
	}
	ci, err := c.Get(ctx, req.Table)
	if err != nil {
		return RevokeResult{}, err
	}
	if req.ExpectCreateRevision != 0 && ci.CreateRevision != req.ExpectCreateRevision {
		return RevokeResult{}, fmt.Errorf("table %s: claim is revision %d held by %s, not the expected revision %d: %w",
			req.Table, ci.CreateRevision, ci.Owner, req.ExpectCreateRevision, ErrClaimChanged)
	}
	now := c.clock.Now().UTC()
	ak := c.auditKey(now, req.Table)
	audit := auditRecord{header{KindAudit, SchemaVersion}, AuditRecord{
		Action: "revoke-claim", Table: req.Table, Actor: req.Actor, Reason: req.Reason, At: now, Claim: ci,
	}}
	ck := c.ClaimKey(req.Table)
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(ck), "=", ci.CreateRevision),
			clientv3.Compare(clientv3.CreateRevision(ak), "=", 0)).
		Then(clientv3.OpDelete(ck), clientv3.OpPut(ak, mustJSON(audit))).
		Commit()
	cancel()
	if err != nil {
		return RevokeResult{}, c.unavailable(ctx, "revoke claim on table "+req.Table+" (outcome unknown: inspect the claim)", err)
	}
	if !resp.Succeeded {
		return RevokeResult{}, fmt.Errorf("table %s: claim revision %d changed before it could be revoked: %w",
			req.Table, ci.CreateRevision, ErrClaimChanged)
	}
	res := RevokeResult{Claim: ci, AuditKey: ak, Revision: resp.Header.Revision}
	if ci.LeaseID != 0 {
		if err := c.revokeLease(ctx, ci.LeaseID); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return res, c.unavailable(context.WithoutCancel(ctx),
				fmt.Sprintf("claim on table %s revoked, but its lease %x expires only within %s", req.Table, ci.LeaseID, ci.LeaseTTL), err)
		}
	}
	return res, nil
}
