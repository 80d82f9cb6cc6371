package coord

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reason says why the busy hint marks a table.
type Reason string

// Busy-hint reasons.
const (
	ReasonClaimed  Reason = "claimed"
	ReasonReserved Reason = "reserved"
)

// Hint is a local, keys-only view of claimed and reserved tables (DESIGN.md
// §3 rule 2), kept by one serializable keys-only range read per directory
// and then one watch stream from that revision: polling it costs etcd
// nothing. It may lag etcd (more so while the connection is down: the
// watch resumes from its revision when it is back); a stale "free" only
// costs one losing claim attempt, a stale "busy" one skipped poll. Safety
// never rests on it.
type Hint struct {
	c      *Client
	cancel context.CancelFunc
	exited chan struct{}

	mu       sync.RWMutex
	synced   bool
	rev      int64
	claimed  map[string]struct{}
	reserved map[string]struct{}
}

// StartHint starts the Client's busy hint and waits for its first load,
// bounded by CallTimeout; Acquire and Busy use it from then on. It runs
// until ctx ends or Close. If the first load fails the error wraps
// errs.ErrUnavailable and no hint is installed. Calling it again returns
// the running hint.
func (c *Client) StartHint(ctx context.Context) (*Hint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hint != nil {
		return c.hint, nil
	}
	hctx, cancel := context.WithCancel(ctx)
	h := &Hint{c: c, cancel: cancel, exited: make(chan struct{})}
	rev, err := h.load(hctx)
	if err != nil {
		cancel()
		return nil, c.unavailable(ctx, "load busy-table hint", err)
	}
	go h.run(hctx, rev)
	c.hint = h
	return h, nil
}

// Busy reports whether table is claimed or reserved according to the hint
// (claimed wins when both). It never calls etcd. Before the first load, or
// while the watch is being re-established, it reports false.
func (h *Hint) Busy(table string) (bool, Reason) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if _, ok := h.claimed[table]; ok {
		return true, ReasonClaimed
	}
	if _, ok := h.reserved[table]; ok {
		return true, ReasonReserved
	}
	return false, ""
}

// Synced reports whether the hint reflects a load plus a live watch.
func (h *Hint) Synced() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.synced
}

// Revision is the etcd revision the hint has seen up to.
func (h *Hint) Revision() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.rev
}

// Close stops the watch and waits for its goroutine.
func (h *Hint) Close() {
	h.cancel()
	<-h.exited
}

// Busy consults the busy hint for table. With a synced watch hint (see
// StartHint) it makes no etcd call at all; otherwise it makes two
// serializable keys-only count reads, served by the local member without a
// quorum round. Errors wrap errs.ErrUnavailable or carry ctx's error.
func (c *Client) Busy(ctx context.Context, table string) (bool, Reason, error) {
	c.mu.Lock()
	h := c.hint
	c.mu.Unlock()
	if h != nil && h.Synced() {
		busy, why := h.Busy(table)
		return busy, why, nil
	}
	for _, probe := range []struct {
		key string
		why Reason
	}{{c.ClaimKey(table), ReasonClaimed}, {c.ReservationKey(table), ReasonReserved}} {
		cctx, cancel := c.callCtx(ctx)
		resp, err := c.cli.Get(cctx, probe.key, clientv3.WithSerializable(), clientv3.WithKeysOnly(), clientv3.WithCountOnly())
		cancel()
		if err != nil {
			return false, "", c.unavailable(ctx, "busy-table probe of "+table, err)
		}
		if resp.Count > 0 {
			return true, probe.why, nil
		}
	}
	return false, "", nil
}

// load reads both directories keys-only and serializably. The watch then
// starts after the older of the two revisions; replaying the few events
// between them is harmless because applying an event is idempotent.
func (h *Hint) load(ctx context.Context) (int64, error) {
	sets := make([]map[string]struct{}, 2)
	rev := int64(0)
	for i, dir := range []string{h.c.claimsDir(), h.c.reservationsDir()} {
		cctx, cancel := h.c.callCtx(ctx)
		resp, err := h.c.cli.Get(cctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
		cancel()
		if err != nil {
			return 0, err
		}
		sets[i] = make(map[string]struct{}, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			sets[i][strings.TrimPrefix(string(kv.Key), dir)] = struct{}{}
		}
		if rev == 0 || resp.Header.Revision < rev {
			rev = resp.Header.Revision
		}
	}
	h.mu.Lock()
	h.claimed, h.reserved, h.rev, h.synced = sets[0], sets[1], rev, true
	h.mu.Unlock()
	return rev, nil
}

// run follows both directories on one watch stream from rev+1. When the
// watch is cancelled (compaction, lost stream) it reloads and watches again,
// retrying with backoff on the injected clock.
func (h *Hint) run(ctx context.Context, rev int64) {
	defer close(h.exited)
	const first = 100 * time.Millisecond
	backoff := first
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-h.c.clock.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		return true
	}
	for {
		started := h.c.clock.Now()
		events := h.follow(ctx, rev)
		h.mu.Lock()
		h.synced = false
		h.mu.Unlock()
		// A watch that ended at once with nothing (a member without a
		// leader ends it while its local reads still answer) is not
		// reopened at once: that would spin.
		if events > 0 || h.c.clock.Since(started) >= time.Second {
			backoff = first
		} else if !wait() {
			return
		}
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if rev, err = h.load(ctx); err == nil {
				break
			}
			if !wait() {
				return
			}
		}
	}
}

// follow applies watch events until the watch ends, and returns how many
// responses with events it applied.
func (h *Hint) follow(ctx context.Context, rev int64) int {
	// A member cut off from the quorum ends the watches (and the hint is
	// read again) instead of leaving them silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	cdir, rdir := h.c.claimsDir(), h.c.reservationsDir()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev + 1)}
	events := 0
	cw := h.c.cli.Watch(wctx, cdir, opts...)
	rw := h.c.cli.Watch(wctx, rdir, opts...)
	for {
		var wr clientv3.WatchResponse
		var ok bool
		var set *map[string]struct{}
		var dir string
		select {
		case wr, ok = <-cw:
			set, dir = &h.claimed, cdir
		case wr, ok = <-rw:
			set, dir = &h.reserved, rdir
		}
		if !ok || wr.Canceled || wr.Err() != nil {
			return events
		}
		if len(wr.Events) > 0 {
			events++
		}
		h.mu.Lock()
		for _, ev := range wr.Events {
			name := strings.TrimPrefix(string(ev.Kv.Key), dir)
			if ev.Type == mvccpb.DELETE {
				delete(*set, name)
			} else {
				(*set)[name] = struct{}{}
			}
		}
		h.rev = max(h.rev, wr.Header.Revision)
		h.mu.Unlock()
	}
}
