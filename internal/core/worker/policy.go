package worker

import (
	"context"
	"errors"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/walflight"
)

// backoff is an exponential delay: base, 2·base, … up to max.
type backoff struct {
	base, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// errorKind is what the worker makes of a failed acquisition or round. It
// is also the `kind` label of walctl_worker_errors_total.
type errorKind string

const (
	// kindFenced: the claim is lost or a newer publisher epoch exists. Stop
	// publishing the table at once and compete for it again.
	kindFenced errorKind = "fenced"
	// kindShutdown: the round was cancelled by shutdown (after the grace).
	kindShutdown errorKind = "shutdown"
	// kindConflict: Lance commits stayed contended, or the WAL epoch moved
	// under the acquisition. Transient: back off, keep the claim.
	kindConflict errorKind = "conflict"
	// kindUnavailable: etcd or the store did not answer (or a commit's
	// outcome is unknown; the next round resolves it). Transient.
	kindUnavailable errorKind = "unavailable"
	// kindWALUnavailable: the WAL server did not answer within the call
	// timeout. Transient, but the claim is released: a holder that cannot
	// reach its WAL must not pin the table (issue 12 item 4).
	kindWALUnavailable errorKind = "wal-unavailable"
	// kindFilesDamaged: prepared files failed verification just before the
	// commit; the attempt is retired and the next round prepares anew.
	kindFilesDamaged errorKind = "files-damaged"
	// kindCorrupt: a data-integrity error (errs.ErrCorrupt). Logged loudly,
	// the claim is released, the table retried only after CorruptBackoff.
	kindCorrupt errorKind = "corrupt"
	// kindNotFound, kindInvalid: the table is not registered in the WAL, or
	// the request was refused as invalid. Handled like kindCorrupt: an
	// operator has to act, spinning does not help.
	kindNotFound errorKind = "not-found"
	kindInvalid  errorKind = "invalid"
	// kindStorage: a failed fsync (publish.ErrStorageFailed). The publisher
	// has stopped the table in this process; the worker stops it too and
	// says why, once: no retry trusts a storage that lost a write.
	kindStorage errorKind = "storage"
	// kindStopped: another process's failed fsync stopped the table for
	// the fleet (coord.ErrTableStopped). Released and looked at again after
	// the transient backoff (at most ErrorBackoff), so a table an operator
	// resumed is published again within it.
	kindStopped errorKind = "stopped"
	// kindOther: anything else. Transient.
	kindOther errorKind = "other"
)

// classify names err. claimErr is the claim's Err (nil while held or when
// there is no claim yet); shutdown tells whether the context the work ran
// on was cancelled by the worker's shutdown.
func classify(err, claimErr error, shutdown bool) errorKind {
	switch {
	case errors.Is(err, publish.ErrStorageFailed):
		return kindStorage
	case errors.Is(err, coord.ErrTableStopped):
		return kindStopped
	case claimErr != nil, errors.Is(err, errs.ErrFenced):
		return kindFenced
	case shutdown && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return kindShutdown
	case errors.Is(err, publish.ErrFilesDamaged):
		return kindFilesDamaged
	case errors.Is(err, errs.ErrCorrupt):
		return kindCorrupt
	case errors.Is(err, errs.ErrConflict):
		return kindConflict
	case errors.Is(err, walflight.ErrServerUnavailable):
		return kindWALUnavailable
	case errors.Is(err, errs.ErrUnavailable):
		return kindUnavailable
	case errors.Is(err, errs.ErrNotFound):
		return kindNotFound
	case errors.Is(err, errs.ErrInvalid):
		return kindInvalid
	}
	return kindOther
}

// severe kinds release the table and wait CorruptBackoff (doubling).
func (k errorKind) severe() bool {
	return k == kindCorrupt || k == kindNotFound || k == kindInvalid
}

// busy reports whether an Acquire error only says someone else has the
// table (claimed, or reserved for catch-up): poll again, it is no error.
func busy(err error) bool {
	return errors.Is(err, coord.ErrClaimed) || errors.Is(err, coord.ErrReserved)
}

// holdPolicy decides when a held claim is given up.
type holdPolicy struct {
	slice coord.SlicePolicy
	idle  IdlePolicy
}

// sliceOver: the claim's bounded slice is used up after rounds rounds
// (idle ones included) and held time.
func (p holdPolicy) sliceOver(rounds int, held time.Duration) bool {
	if p.slice.MaxRounds > 0 && rounds >= p.slice.MaxRounds {
		return true
	}
	return p.slice.MaxDuration > 0 && held >= p.slice.MaxDuration
}

// idleOver: the table has been idle for idleRounds consecutive rounds,
// spanning idleFor.
func (p holdPolicy) idleOver(idleRounds int, idleFor time.Duration) bool {
	if idleRounds == 0 {
		return false
	}
	if p.idle.MaxRounds > 0 && idleRounds >= p.idle.MaxRounds {
		return true
	}
	return p.idle.MaxDuration > 0 && idleFor >= p.idle.MaxDuration
}
