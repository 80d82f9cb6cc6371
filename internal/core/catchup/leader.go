package catchup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// KindLeader is the value of a master's election key.
const KindLeader = "catchup-leader"

// DefaultLeaderTTL is the lease of a master's election session: a leader
// that cannot renew it for this long stops acting, and another may lead.
const DefaultLeaderTTL = 10 * time.Second

// ErrNotLeader means this master is not (or no longer) the catch-up
// leader: its controller write was refused, locally (the term ended, or
// its last successful keep-alive is older than the lease TTL) or by etcd
// (the leader key's CreateRevision is not the term's). Callers go to the
// leader (LeaderInfo) and never retry the write here.
var ErrNotLeader = fmt.Errorf("this master is not the catch-up leader: %w", errs.ErrUnavailable)

// LeaderInfo is the value of the election key: who leads and where its
// API is. JSON: kind, schema_version, id, url, elected_at.
type LeaderInfo struct {
	header
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	ElectedAt time.Time `json:"elected_at"`
}

// LeaderConfig configures Campaign.
type LeaderConfig struct {
	// ID names this master in logs and the leader record (required).
	ID string
	// URL is this master's API, where followers send admissions.
	URL string
	// TTL is the session lease (DefaultLeaderTTL if <= 0; whole seconds).
	TTL time.Duration
	// Clock measures the wall-time rule (default real).
	Clock clock.Clock
}

// Term is one master's leadership, from Campaign until Done. Like a
// coord.Claim it owns its lease and one goroutine: keep-alives are sent
// every TTL/3 and timed from when they were sent; once the last successful
// one is older than the TTL (or etcd reports the lease or the key gone,
// or Resign), the term ends and Context is cancelled — before etcd can
// expire the lease and let another master win. Every controller write
// carries Guard in its own transaction (Store.Guarded), so a write issued
// by a paused, deposed leader still fails, with ErrNotLeader.
type Term struct {
	s       *Store
	clock   clock.Clock
	ttl     time.Duration
	info    LeaderInfo
	sess    *concurrency.Session
	elec    *concurrency.Election
	key     string
	rev     int64
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    chan struct{}
	exited  chan struct{}
	mu      sync.Mutex
	lastKA  time.Time
	refused func(by string)
}

func (s *Store) electionPrefix() string { return s.k.dir() + "leader/" }

// Campaign waits until this master leads (or ctx ends) and returns its
// term. The session lease is granted here and revoked by Resign. A
// campaign whose lease lapsed while it waited is not a term: it fails
// with ErrNotLeader and the caller campaigns again. On cancellation it
// returns ctx's cause and leaves no key behind (the lease is revoked).
func (s *Store) Campaign(ctx context.Context, cfg LeaderConfig) (*Term, error) {
	if cfg.ID == "" {
		return nil, fmt.Errorf("catch-up leader: no id: %w", errs.ErrInvalid)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaderTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	secs := int64(math.Ceil(cfg.TTL.Seconds()))
	t := &Term{s: s, clock: cfg.Clock, ttl: time.Duration(secs) * time.Second,
		info: LeaderInfo{header: hdr(KindLeader), ID: cfg.ID, URL: cfg.URL},
		stop: make(chan struct{}), exited: make(chan struct{}), refused: s.metrics.refusedWrite}
	t.ctx, t.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	cctx, cancel := s.callCtx(ctx)
	lease, err := s.cli.Grant(cctx, secs)
	cancel()
	if err != nil {
		return nil, unavailable(ctx, s.c, "grant the leader lease", err)
	}
	if t.sess, err = concurrency.NewSession(s.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(t.ctx)); err != nil {
		s.revoke(lease.ID)
		return nil, unavailable(ctx, s.c, "open the leader session", err)
	}
	t.elec = concurrency.NewElection(t.sess, s.electionPrefix())
	if err := t.campaign(ctx); err != nil {
		s.revoke(lease.ID)
		t.cancel(err)
		return nil, err
	}
	go t.run()
	return t, nil
}

// campaign runs the election until this session leads, then proves it:
// a keep-alive (its send time starts the wall-time rule) and a read of the
// key at the term's CreateRevision.
func (t *Term) campaign(ctx context.Context) error {
	s := t.s
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.sess.Done():
			cancel()
		case <-wctx.Done():
		}
	}()
	t.info.ElectedAt = s.now()
	if err := t.elec.Campaign(wctx, encode(KindLeader, t.info)); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("campaign: session lease %x ended while waiting: %v: %w", t.sess.Lease(), err, ErrNotLeader)
	}
	t.key, t.rev = t.elec.Key(), t.elec.Rev()
	t.info.ElectedAt = s.now()
	sent := t.clock.Now()
	cctx, ccancel := s.callCtx(ctx)
	defer ccancel()
	if _, err := s.cli.KeepAliveOnce(cctx, t.sess.Lease()); err != nil {
		return fmt.Errorf("campaign: first keep-alive of lease %x: %v: %w", t.sess.Lease(), err, ErrNotLeader)
	}
	resp, err := s.cli.Txn(cctx).If(t.Guard()).Then(clientv3.OpPut(t.key, encode(KindLeader, t.info), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return unavailable(ctx, s.c, "confirm leadership", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("campaign: key %s lapsed before it led: %w", t.key, ErrNotLeader)
	}
	t.lastKA = sent
	return nil
}

// Guard is the comparison every controller write carries: the term's
// election key still exists at the term's CreateRevision.
func (t *Term) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)
}

// Key and Rev identify the term (the election key and its CreateRevision).
func (t *Term) Key() string { return t.key }

// Rev is the term's token: its election key's CreateRevision.
func (t *Term) Rev() int64 { return t.rev }

// Context is cancelled, with the reason as its cause, when the term ends.
func (t *Term) Context() context.Context { return t.ctx }

// Done is closed when the term has ended and its goroutine exited.
func (t *Term) Done() <-chan struct{} { return t.exited }

// Err is why the term ended (nil while it lasts).
func (t *Term) Err() error {
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// check is the local half of the guard: a term that ended, or whose last
// successful keep-alive is older than the TTL, does not write.
func (t *Term) check() error {
	if err := t.Err(); err != nil {
		return err
	}
	if age := t.age(); age >= t.ttl {
		return fmt.Errorf("leader lease %x: last successful keep-alive %s ago, TTL %s: %w", t.sess.Lease(), age, t.ttl, ErrNotLeader)
	}
	return nil
}

// Resign ends the term: the goroutine stops, the key is deleted (guarded
// by the term's revision) and the lease revoked, so another master leads
// at once. Idempotent; errors are only logged by callers (the lease
// expires by itself).
func (t *Term) Resign(ctx context.Context) error {
	t.end(fmt.Errorf("resigned: %w", ErrNotLeader))
	<-t.exited
	cctx, cancel := t.s.callCtx(context.WithoutCancel(ctx))
	defer cancel()
	err := t.elec.Resign(cctx)
	t.s.revoke(t.sess.Lease())
	return err
}

func (t *Term) end(cause error) {
	t.cancel(cause)
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
}

func (s *Store) revoke(id clientv3.LeaseID) {
	cctx, cancel := s.callCtx(context.Background())
	defer cancel()
	_, _ = s.cli.Revoke(cctx, id)
}

func (t *Term) age() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clock.Since(t.lastKA)
}

// run is the term's one goroutine: keep-alives timed from their send, the
// wall-time expiry, and a watch of the election key.
func (t *Term) run() {
	defer close(t.exited)
	defer t.sess.Orphan()
	wch := t.s.cli.Watch(t.ctx, t.key, clientv3.WithRev(t.rev+1))
	interval := t.ttl / 3
	renew := t.clock.NewTimer(interval)
	defer renew.Stop()
	expiry := t.clock.NewTimer(t.ttl - t.age())
	defer expiry.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-expiry.C():
			if left := t.ttl - t.age(); left > 0 {
				expiry.Reset(left)
				continue
			}
			t.end(fmt.Errorf("leader lease %x: no successful keep-alive for %s (TTL %s): %w", t.sess.Lease(), t.age(), t.ttl, ErrNotLeader))
			return
		case <-renew.C():
			if err := t.renew(); err != nil {
				t.end(err)
				return
			}
			expiry.Reset(max(0, t.ttl-t.age()))
			renew.Reset(interval)
		case wr, ok := <-wch:
			if !ok || wr.Canceled {
				wch = nil // keep-alives and the wall-time rule still guard
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != t.rev {
					t.end(fmt.Errorf("leader key %s (revision %d) deleted at revision %d: %w", t.key, t.rev, ev.Kv.ModRevision, ErrNotLeader))
					return
				}
			}
		}
	}
}

// renew sends one keep-alive; a transient failure is not an error (the
// expiry timer decides), a lease etcd no longer knows is.
func (t *Term) renew() error {
	sent := t.clock.Now()
	ctx, cancel := context.WithTimeout(t.ctx, min(t.s.callTimeout, max(time.Millisecond, t.ttl-t.age())))
	resp, err := t.s.cli.KeepAliveOnce(ctx, t.sess.Lease())
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
		return fmt.Errorf("etcd no longer knows leader lease %x: %w", t.sess.Lease(), ErrNotLeader)
	case err != nil:
		return nil
	}
	t.mu.Lock()
	t.lastKA = sent
	t.mu.Unlock()
	return nil
}

// Leader reads who leads now; ok is false when nobody does. An election
// key of another kind or a newer schema fails closed
// (coord.ErrUnknownRecord).
func (s *Store) Leader(ctx context.Context) (LeaderInfo, bool, error) {
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Get(cctx, s.electionPrefix(), clientv3.WithFirstCreate()...)
	cancel()
	if err != nil {
		return LeaderInfo{}, false, unavailable(ctx, s.c, "read the catch-up leader", err)
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{}, false, nil
	}
	var li LeaderInfo
	if err := decodeKV(resp.Kvs[0], KindLeader, &li); err != nil {
		return LeaderInfo{}, false, err
	}
	return li, true, nil
}

// Guarded returns a Store whose every write (admission, reconcile steps,
// cancellation, statistics) is checked against t locally and carries
// t.Guard in the same transaction; a refused write is ErrNotLeader and is
// counted (Metrics). Reads are unchanged.
func (s *Store) Guarded(t *Term) *Store {
	g := *s
	g.term = t
	return &g
}

// acting is the local check before a side effect outside etcd (creating
// or terminating a Job): nil on an unguarded Store or within the term.
func (s *Store) acting() error {
	if s.term == nil {
		return nil
	}
	if err := s.term.check(); err != nil {
		s.term.refused("local")
		return err
	}
	return nil
}

// leaderTxn is a controller write under the term: refused locally when the
// term is over, else sent as If(Guard) Then(Txn(cmps, then)), so etcd
// applies it only while the term's key lives; the inner transaction's
// response is returned. It is sent to completion (bounded by the call
// timeout) even if ctx ends meanwhile: etcd's answer, not a local
// cancellation, says whether a deposed leader's write landed.
func (s *Store) leaderTxn(ctx context.Context, op string, cmps []clientv3.Cmp, then []clientv3.Op) (*clientv3.TxnResponse, error) {
	t := s.term
	if err := s.acting(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := failpoint.Inject(context.WithoutCancel(ctx), failpoint.BeforeControllerWrite, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	cctx, cancel := s.callCtx(context.WithoutCancel(ctx))
	resp, err := s.cli.Txn(cctx).If(t.Guard()).Then(clientv3.OpTxn(cmps, then, nil)).Commit()
	cancel()
	if err != nil {
		return nil, unavailable(ctx, s.c, op+" (outcome unknown)", err)
	}
	if !resp.Succeeded {
		t.refused("etcd")
		return nil, fmt.Errorf("%s: leader key %s of revision %d is gone (another master leads): %w", op, t.key, t.rev, ErrNotLeader)
	}
	inner := (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn())
	inner.Header = resp.Header
	return inner, nil
}

// WaitLeader returns the leader once one is elected, watching the election
// from the revision it read (no polling). On cancellation it returns ctx's
// cause; an unknown election record fails closed.
func (s *Store) WaitLeader(ctx context.Context) (LeaderInfo, error) {
	for {
		cctx, cancel := s.callCtx(ctx)
		resp, err := s.cli.Get(cctx, s.electionPrefix(), clientv3.WithFirstCreate()...)
		cancel()
		if err != nil {
			return LeaderInfo{}, unavailable(ctx, s.c, "read the catch-up leader", err)
		}
		if len(resp.Kvs) > 0 {
			var li LeaderInfo
			return li, decodeKV(resp.Kvs[0], KindLeader, &li)
		}
		wctx, wcancel := context.WithCancel(ctx)
		wch := s.cli.Watch(wctx, s.electionPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterDelete())
		select {
		case <-ctx.Done():
		case <-wch:
		}
		wcancel()
		if ctx.Err() != nil {
			return LeaderInfo{}, context.Cause(ctx)
		}
	}
}
