package coord

import (
	"context"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
)

// Sentinel errors. Callers test them with errors.Is; the command layer maps
// their category (the wrapped errs.Err*) to an exit code.
var (
	// ErrClaimed means another holder owns the table's claim.
	ErrClaimed = fmt.Errorf("table is claimed by another holder: %w", errs.ErrConflict)
	// ErrReserved means the table is reserved for a catch-up Job that is not
	// the caller (DESIGN.md §3 rule 14): ordinary claims exclude it.
	ErrReserved = fmt.Errorf("table is reserved for catch-up: %w", errs.ErrConflict)
	// ErrNotReserved means a catch-up executor asked for a table that has no
	// reservation at all.
	ErrNotReserved = fmt.Errorf("table has no catch-up reservation: %w", errs.ErrConflict)
	// ErrNotOwner means the claim this holder acquired is gone or has been
	// replaced (revoked, expired and re-acquired): the holder must stop.
	ErrNotOwner = fmt.Errorf("claim is no longer held by this holder: %w", errs.ErrFenced)
	// ErrLeaseExpired means the claim's lease was lost: etcd reported it gone,
	// or no keep-alive succeeded for a whole TTL (the wall-time rule).
	ErrLeaseExpired = fmt.Errorf("claim lease expired: %w", errs.ErrFenced)
	// ErrReleased means the holder released the claim itself.
	ErrReleased = fmt.Errorf("claim released: %w", errs.ErrFenced)
	// ErrStaleEpoch means SetEpoch was asked to record an epoch lower than
	// the one the claim already records.
	ErrStaleEpoch = fmt.Errorf("stale publisher epoch: %w", errs.ErrFenced)
	// ErrNoClaim means a table has no claim (inspect or revoke of an absent
	// claim).
	ErrNoClaim = fmt.Errorf("no claim: %w", errs.ErrNotFound)
	// ErrClaimChanged means a claim is not the one the caller expected (its
	// CreateRevision differs): nothing was changed.
	ErrClaimChanged = fmt.Errorf("claim changed: %w", errs.ErrConflict)
	// ErrUnknownRecord means a record has a kind or schema version this
	// binary does not know; walctl fails closed instead of guessing.
	ErrUnknownRecord = fmt.Errorf("unknown record kind or schema version: %w", errs.ErrCorrupt)
)

// unavailable turns an etcd error into one that names the endpoints and
// wraps errs.ErrUnavailable. When the caller's own ctx ended, the caller's
// cause is returned instead (with the operation named), so cancellation is
// not reported as an outage.
func (c *Client) unavailable(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd %v: %s: no answer within %s: %w", c.endpoints, op, c.callTimeout, errs.ErrUnavailable)
	}
	return fmt.Errorf("etcd %v: %s: %v: %w", c.endpoints, op, err, errs.ErrUnavailable)
}
