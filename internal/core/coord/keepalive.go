package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// run is the claim's single goroutine. It renews the lease every TTL/3 with
// KeepAliveOnce (rather than clientv3's KeepAlive stream) so that it knows
// when each successful renewal was *sent*: the wall-time rule counts the TTL
// from there, which is never later than etcd's own renewal. It also watches
// the claim key, so a revocation or replacement ends the claim at once.
func (cl *Claim) run(seen int64) {
	defer close(cl.exited)
	wch := cl.watch(seen)
	defer cl.cancel() // ends the watch too
	clk := cl.c.clock
	interval := cl.ttl / 3
	retry := min(interval/2, time.Second)

	// The first renewal is due TTL/3 after the grant (or the renewal that
	// followed it) was sent, not after this goroutine started.
	renew := clk.NewTimer(max(0, interval-cl.age()))
	defer renew.Stop()
	expiry := clk.NewTimer(cl.untilExpiry())
	defer expiry.Stop()

	for {
		select {
		case <-cl.stop:
			return

		case <-expiry.C():
			if left := cl.untilExpiry(); left > 0 {
				expiry.Reset(left)
				continue
			}
			cl.lose(cl.wallTimeExpired(cl.age()))
			return

		case <-renew.C():
			if err := cl.renew(renew, expiry, interval, retry); err != nil {
				cl.lose(err)
				return
			}
			if wch == nil && cl.age() < interval { // renewed: the quorum answers again
				wch = cl.watch(seen)
			}

		case wr, ok := <-wch:
			if !ok || wr.Canceled || wr.Err() != nil {
				// Client closing, no leader, or history compacted:
				// keep-alives, the wall-time rule and the validation
				// before each commit still guard the claim; the watch is
				// opened again after the next renewal (past a compaction,
				// from its revision).
				if wr.CompactRevision > 0 {
					seen = max(seen, wr.CompactRevision-1)
				}
				wch = nil
				continue
			}
			seen = max(seen, wr.Header.Revision)
			if err := cl.checkEvents(wr.Events); err != nil {
				cl.lose(err)
				return
			}
		}
	}
}

// renew sends one keep-alive when the renew timer fires and resets the
// timers. It returns why the claim is lost, or nil; a transient failure
// retries after retry, and the expiry timer ends the claim if no renewal
// succeeds in time.
func (cl *Claim) renew(renew, expiry clock.Timer, interval, retry time.Duration) error {
	if cl.hooks.pauseKeepAlive.Load() {
		renew.Reset(interval)
		return nil
	}
	left := cl.untilExpiry()
	if left <= 0 {
		return cl.wallTimeExpired(cl.age())
	}
	sent := cl.c.clock.Now()
	ctx, cancel := context.WithTimeout(cl.ctx, min(cl.c.callTimeout, left))
	resp, err := cl.c.cli.KeepAliveOnce(ctx, cl.lease)
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("table %s: etcd no longer knows lease %x: %w", cl.table, cl.lease, ErrLeaseExpired)
	case err != nil:
		// Transient (or Release cancelled it): try again soon.
		renew.Reset(retry)
	case resp.TTL <= 0:
		return fmt.Errorf("table %s: etcd reports lease %x expired: %w", cl.table, cl.lease, ErrLeaseExpired)
	default:
		cl.mu.Lock()
		cl.lastKA = sent
		cl.mu.Unlock()
		renew.Reset(interval)
		expiry.Reset(cl.untilExpiry())
	}
	return nil
}

// checkEvents returns ErrNotOwner when the watched claim key was deleted
// or replaced.
func (cl *Claim) checkEvents(events []*clientv3.Event) error {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE {
			return fmt.Errorf("table %s: claim revision %d was deleted at revision %d: %w",
				cl.table, cl.rev, ev.Kv.ModRevision, ErrNotOwner)
		}
		if ev.Kv.CreateRevision != cl.rev {
			return fmt.Errorf("table %s: claim replaced by revision %d: %w", cl.table, ev.Kv.CreateRevision, ErrNotOwner)
		}
	}
	return nil
}

func (cl *Claim) age() time.Duration {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.c.since(cl.lastKA)
}

func (cl *Claim) untilExpiry() time.Duration { return cl.ttl - cl.age() }
