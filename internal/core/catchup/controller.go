package catchup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/errs"
)

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	// Runner starts and stops executors (required).
	Runner Runner
	// Clock drives observation, backoff and the work queue (default real).
	Clock clock.WithTicker
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Scanner, when set, is run every ScanInterval, and every owned target
	// is then offered to Master.Admit (source "scan").
	Scanner *Scanner
	// ScanInterval defaults to the policy's observe interval.
	ScanInterval time.Duration
}

// Controller drives every table's catch-up from its durable records, like
// a Kubernetes controller: a watch and a periodic resync feed a
// rate-limited work queue, and each reconcile reads the table's records,
// takes one guarded step and requeues itself for timed events. All intent
// (reservation, create, termination) is in etcd before it is acted on, so
// a restarted master (or a second one) reconciles the same Job under the
// same deterministic name and never creates another.
type Controller struct {
	m            *Master
	s            *Store
	p            Policy
	r            Runner
	clock        clock.WithTicker
	log          *slog.Logger
	scanner      *Scanner
	scanInterval time.Duration
	// q is client-go's work queue of table names: de-duplicating (a table
	// is queued once, and re-queued after Done if added while processed),
	// delaying (AddAfter for timed events) and rate-limited per table
	// (exponential backoff of failed reconciles until Forget).
	q workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	detectors map[string]*stallDetector
	observed  map[string]StallObservation
}

// NewController returns a controller for m's policy. Run starts it.
func NewController(m *Master, cfg ControllerConfig) (*Controller, error) {
	if cfg.Runner == nil {
		return nil, fmt.Errorf("catch-up controller: no runner: %w", errs.ErrInvalid)
	}
	c := &Controller{m: m, s: m.s, p: m.p, r: cfg.Runner, clock: cfg.Clock, log: cfg.Logger,
		scanner: cfg.Scanner, scanInterval: cfg.ScanInterval,
		detectors: map[string]*stallDetector{}, observed: map[string]StallObservation{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = m.log
	}
	if c.scanInterval <= 0 {
		c.scanInterval = c.p.ObserveInterval
	}
	c.q = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, max(time.Second, c.p.ObserveInterval)),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: c.clock})
	return c, nil
}

// Run reconciles until ctx ends, then shuts the work queue down and returns
// nil after its goroutines have stopped; a controller runs once. A
// cancelled reconcile leaves only persisted intent behind; the next Run
// (here or on another master) carries it on. It fails early only if the
// first listing of targets fails (errs.ErrUnavailable,
// coord.ErrUnknownRecord).
func (c *Controller) Run(ctx context.Context) error {
	defer c.q.ShutDown()
	rev, err := c.resync(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); <-ctx.Done(); c.q.ShutDown() }()
	go func() { defer wg.Done(); c.watch(ctx, rev) }()
	go func() { defer wg.Done(); c.periodic(ctx) }()
	go func() {
		defer wg.Done()
		for c.processNext(ctx) {
		}
	}()
	wg.Wait()
	return nil
}

// resync enqueues every table with an active record and returns the
// revision of the listing.
func (c *Controller) resync(ctx context.Context) (int64, error) {
	cctx, cancel := c.s.callCtx(ctx)
	resp, err := c.s.cli.Get(cctx, c.s.k.targetsDir(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return 0, unavailable(ctx, c.s.c, "list catch-up targets", err)
	}
	for _, kv := range resp.Kvs {
		var rec targetRecord
		if err := decodeKV(kv, KindTarget, &rec); err != nil {
			return 0, err
		}
		if rec.Phase.Active() {
			c.q.Add(rec.Table)
		}
	}
	return resp.Header.Revision, nil
}

// watch enqueues a table when its target record changes or its claim is
// deleted (a worker's handover). A broken watch is re-established after a
// resync.
func (c *Controller) watch(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		targets := c.s.cli.Watch(wctx, c.s.k.targetsDir(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		claims := c.s.cli.Watch(wctx, c.s.k.claimsDir(), clientv3.WithPrefix(), clientv3.WithRev(rev+1),
			clientv3.WithFilterPut())
		for ok := true; ok; {
			select {
			case <-ctx.Done():
				ok = false
			case wr, open := <-targets:
				ok = c.enqueueEvents(wr, open, c.s.k.targetsDir(), nil)
			case wr, open := <-claims:
				ok = c.enqueueEvents(wr, open, c.s.k.claimsDir(), c.p.Owns)
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		t := c.clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
		if r, err := c.resync(ctx); err == nil {
			rev = r
		} else {
			c.log.WarnContext(ctx, "catch-up controller: resync failed", "err", err)
		}
	}
}

// enqueueEvents queues the table of every event (only those keep accepts,
// when set); false when the watch has ended and must be re-established.
func (c *Controller) enqueueEvents(wr clientv3.WatchResponse, open bool, dir string, keep func(string) bool) bool {
	if !open || wr.Err() != nil {
		return false
	}
	for _, ev := range wr.Events {
		if table := c.s.k.tableOf(dir, string(ev.Kv.Key)); keep == nil || keep(table) {
			c.q.Add(table)
		}
	}
	return true
}

// periodic resyncs and (with a Scanner) scans and admits.
func (c *Controller) periodic(ctx context.Context) {
	for {
		if c.scanner != nil {
			if _, err := c.ScanOnce(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "catch-up backlog scan", "err", err)
			}
		}
		t := c.clock.NewTimer(c.scanInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if _, err := c.resync(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "catch-up controller: resync failed", "err", err)
		}
	}
}

// ScanOnce runs the Scanner (if any) and offers every owned target to
// Admit, through the same path as the API. It returns the admissions; an
// error from one table does not stop the others (they are joined).
func (c *Controller) ScanOnce(ctx context.Context) ([]Admission, error) {
	var errList []error
	if c.scanner != nil {
		if _, err := c.scanner.Scan(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	var out []Admission
	if !c.p.Enabled {
		return out, errors.Join(errList...)
	}
	for _, t := range c.p.OwnedTargets {
		a, err := c.m.Admit(ctx, Request{Target: t, Reason: "backlog scan", Source: "scan"})
		if err != nil {
			errList = append(errList, err)
			continue
		}
		out = append(out, a)
		if a.Decision.Admitted() {
			c.q.Add(t)
		}
	}
	return out, errors.Join(errList...)
}

// processNext reconciles one queued table; false when ctx ended.
func (c *Controller) processNext(ctx context.Context) bool {
	table, shutdown := c.q.Get()
	if shutdown {
		return false
	}
	defer c.q.Done(table)
	after, err := c.reconcile(ctx, table)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		c.log.WarnContext(ctx, "catch-up reconcile failed; retrying", "table", table, "err", err)
		c.q.AddRateLimited(table)
	default:
		c.q.Forget(table)
		if after > 0 {
			c.q.AddAfter(table, after)
		}
	}
	return true
}

// Observation returns the stall detector's latest reading of table, for
// status output; ok is false when this controller has not sampled it.
func (c *Controller) Observation(table string) (StallObservation, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.observed[table]
	return o, ok
}

func (c *Controller) detector(table string) *stallDetector {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.detectors[table]
	if d == nil {
		d = &stallDetector{p: c.p}
		c.detectors[table] = d
	}
	return d
}

func (c *Controller) forget(table string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.detectors, table)
	delete(c.observed, table)
}

func (c *Controller) record(table string, o StallObservation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed[table] = o
}
