// Package worker is `walctl worker run`'s core: a long-running
// materializer that keeps an application-authorized fixed set of tables
// published (DESIGN.md §3 rules 1, 2, 10 and 12).
//
// Each table has one goroutine that loops, Kubernetes-controller style, on
// an injected clock:
//
//   - look: the busy hint (free: no etcd call), then the WAL's sealed work
//     above the table's watermarks (one Stats call; the watermarks are the
//     ones last seen, or read from the table's latest Lance version); a
//     busy table or one without work is looked at again after PollInterval;
//   - claim: wait for one of MaxConcurrentTables slots, then
//     publish.Publisher.Acquire (claim + publisher epoch);
//   - hold: run rounds, each within one of MaxConcurrentRounds global slots,
//     back to back while there is work and every PollInterval while idle;
//   - release at the end of the claim's slice, after IdleRelease, after a
//     data-integrity error (then wait CorruptBackoff), or on shutdown; after
//     losing the claim, leave the table to others for LostBackoff.
//
// A round runs on the claim's context: when the claim is lost (revoked,
// expired, replaced, or a newer epoch fences the table) the round stops at
// its next step and the table goes back to being competed for; the commit
// checks against the table's exact parent version are what keep it safe.
//
// Rounds have no total runtime ceiling (issue 7: ordinary worker rounds get
// the idle and cancel guards, not a ceiling): a round is cancelled only by
// the loss of its claim, or by shutdown once ShutdownGrace has passed.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
)

// errShutdownGrace cancels rounds still running ShutdownGrace after
// shutdown began.
var errShutdownGrace = fmt.Errorf("worker shutdown grace is over: %w", context.Canceled)

// Worker publishes a fixed set of tables with one Publisher. Make it with
// New and start it with Run.
type Worker struct {
	pub *publish.Publisher
	co  *coord.Client
	cfg Config

	// Set by Run.
	log       *slog.Logger
	m         *Metrics
	tables    *semaphore.Weighted // MaxConcurrentTables
	rounds    *semaphore.Weighted // MaxConcurrentRounds
	roundBase context.Context     // detached from shutdown, cancelled after the grace
	policy    holdPolicy
	// releaseFailures counts claims whose release failed (left to expire).
	releaseFailures atomic.Int64
}

// New returns a worker publishing cfg.Tables through pub, whose claims live
// in co. Configuration is checked by Run.
func New(pub *publish.Publisher, co *coord.Client, cfg Config) *Worker {
	return &Worker{pub: pub, co: co, cfg: cfg}
}

// Run publishes the configured tables until ctx is cancelled, then shuts
// down and returns nil. It returns an error only before doing anything: for
// a bad Config (errs.ErrInvalid), or for a configured table that the WAL
// says is not registered (wal.ErrUnknownTable, errs.ErrNotFound, naming
// it) — a typo must not start a worker that retries it for ever. A WAL
// that cannot answer that check is only logged: the tables are looked at
// again with backoff. Failures while running are logged, counted in
// Metrics and retried with backoff; they never end Run.
//
// On cancellation of ctx (SIGTERM in the CLI) Run stops taking work: no new
// claim and no new round is started, waits stop at once. Rounds already
// admitted run to completion on a context detached from ctx (a commit is
// never cut off by the signal) but bound to their claim; after
// ShutdownGrace they are cancelled too, at their next step. Run then joins
// every table goroutine, releases every claim it holds (revoking its lease,
// each bounded by ReleaseTimeout even though ctx is done; a failed
// revocation is logged and the lease expires within its TTL) and returns
// nil. A Run may be called once per Worker.
func (w *Worker) Run(ctx context.Context) error {
	cfg, err := w.cfg.withDefaults()
	if err != nil {
		return err
	}
	w.cfg, w.log, w.m = cfg, cfg.Logger, cfg.Metrics
	if err := w.checkTables(ctx); err != nil {
		return err
	}
	w.tables = semaphore.NewWeighted(int64(cfg.MaxConcurrentTables))
	w.rounds = semaphore.NewWeighted(int64(cfg.MaxConcurrentRounds))
	w.policy = holdPolicy{slice: cfg.Slice, idle: cfg.IdleRelease}
	roundBase, cancelRounds := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRounds(nil)
	w.roundBase = roundBase

	w.log.Info("worker starting", "tables", cfg.Tables,
		"max_concurrent_tables", cfg.MaxConcurrentTables, "max_concurrent_rounds", cfg.MaxConcurrentRounds,
		"poll_interval", cfg.PollInterval, "slice_rounds", cfg.Slice.MaxRounds, "slice_duration", cfg.Slice.MaxDuration)

	var wg sync.WaitGroup
	wg.Go(func() { w.keepHint(ctx) })
	for _, table := range cfg.Tables {
		tl := &tableLoop{
			w: w, table: table, log: w.log.With("table", table),
			transient: backoff{base: cfg.PollInterval, max: cfg.ErrorBackoff},
			severe:    backoff{base: cfg.CorruptBackoff, max: cfg.MaxCorruptBackoff},
		}
		wg.Go(func() { tl.run(ctx) })
	}

	joined := make(chan struct{})
	var graceWG sync.WaitGroup
	graceWG.Go(func() {
		select {
		case <-joined:
			return
		case <-ctx.Done():
		}
		w.log.Info("shutting down: no new claims or rounds; admitted rounds may finish",
			"grace", cfg.ShutdownGrace, "cause", context.Cause(ctx))
		if cfg.ShutdownGrace < 0 {
			return
		}
		t := cfg.Clock.NewTimer(cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-joined:
		case <-t.C():
			w.log.Warn("shutdown grace over: cancelling rounds still running", "grace", cfg.ShutdownGrace)
			cancelRounds(errShutdownGrace)
		}
	})
	wg.Wait()
	close(joined)
	graceWG.Wait()
	if n := w.releaseFailures.Load(); n > 0 {
		w.log.Warn("worker stopped; some claims could not be released and expire within their lease TTL", "failed_releases", n)
	} else {
		w.log.Info("worker stopped; every claim released")
	}
	return nil
}

// checkTables refuses tables the WAL does not know.
func (w *Worker) checkTables(ctx context.Context) error {
	for _, table := range w.cfg.Tables {
		cctx, cancel := context.WithTimeout(ctx, w.cfg.ReleaseTimeout)
		_, err := w.cfg.Log.Table(cctx, table)
		cancel()
		switch {
		case errors.Is(err, errs.ErrNotFound):
			return fmt.Errorf("worker: table %s is not registered in the WAL (walctl table create %s …): %w", table, table, err)
		case err != nil && ctx.Err() == nil:
			w.log.Warn("could not check that the table is registered; it is looked at again with backoff", "table", table, "err", err)
		}
	}
	return nil
}

// keepHint starts the client's process-wide busy hint (DESIGN.md §3 rule
// 2). Until it is running, busy probes fall back to serializable keys-only
// reads (still no quorum, no lease); it is retried with backoff. The hint
// outlives Run (it runs until the coord.Client is closed) because other
// users of the client rely on it too.
func (w *Worker) keepHint(ctx context.Context) {
	b := backoff{base: w.cfg.PollInterval, max: w.cfg.ErrorBackoff}
	for {
		_, err := w.co.StartHint(context.WithoutCancel(ctx))
		if err == nil || ctx.Err() != nil {
			return
		}
		d := b.next()
		w.log.Warn("busy-table hint not started; busy probes use serializable reads meanwhile", "err", err, "retry_in", d)
		if !w.sleep(ctx, d, nil) {
			return
		}
	}
}

// sleep waits d on the injected clock. It returns false, early, when ctx is
// done or stop is closed.
func (w *Worker) sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := w.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}
