package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// DefaultShutdownGrace is how long in-flight API requests may run on after
// the master is told to stop.
const DefaultShutdownGrace = 10 * time.Second

// WAL is what the master needs of the WAL: table existence for the API and
// backlog statistics for the scan (wal.Log satisfies it).
type WAL interface {
	Tables
	catchup.StatsSource
}

var _ WAL = wal.Log(nil)

// RunConfig is everything `walctl master run` hands to Run.
type RunConfig struct {
	// Store is the catch-up records' store on the master's etcd.
	Store *catchup.Store
	// Policy is this master's configured policy; it must equal the stored
	// one (catchup.OpenMaster).
	Policy catchup.Policy
	// NewRunner builds the Job runner for the normalized, persisted policy.
	NewRunner func(catchup.Policy) (catchup.Runner, error)
	// WAL and Watermarks feed the API and the backlog scan.
	WAL        WAL
	Watermarks catchup.WatermarkFunc
	// ScanInterval defaults to the policy's observe interval.
	ScanInterval time.Duration
	// Listen is the API's address (host:port; port 0 picks one).
	Listen string
	// EndpointFile, when set, receives the API's URL (atomically) while
	// the master runs; it is removed when Run returns.
	EndpointFile string
	// Token is the API's bearer token (required).
	Token string
	// ShutdownGrace bounds in-flight requests after ctx ends
	// (DefaultShutdownGrace if <= 0).
	ShutdownGrace time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Started, when set, is called with the API's URL once it serves.
	Started func(url string)
	// ID names this master in the election (default host name and pid).
	ID string
	// AdvertiseURL is where followers send clients to this master when it
	// leads (default the URL it listens on).
	AdvertiseURL string
	// LeaderTTL is the election session's lease (catchup.DefaultLeaderTTL
	// if <= 0): a leader that cannot renew it for this long stops acting.
	LeaderTTL time.Duration
	// Metrics is set by Run (the catch-up counters on /metrics).
	Metrics *catchup.Metrics
}

// Run is `walctl master run`: it opens the catch-up master under the
// stored policy (a different stored policy fails closed with
// catchup.ErrPolicyMismatch before anything is served), serves the API with
// /healthz and /metrics on cfg.Listen, and campaigns for the catch-up
// leadership (catchup.Store.Campaign): only the leader runs the controller
// (backlog scan, admission, observation, cancellation), every write of it
// guarded by the term; a follower serves status and answers admissions and
// cancellations with 503 and the leader's URL (NotLeaderError). A lost
// term stops the controller and campaigns again. All this until ctx ends. It then stops
// accepting requests, lets in-flight ones finish within the shutdown grace,
// stops the controller and returns nil; running Jobs are left to finish,
// and a restarted master reconciles them from etcd. It returns early with
// the error of the server or the controller if either fails. A bad listen
// address is errs.ErrInvalid.
func Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Metrics = catchup.NewMetrics(reg)
	store := cfg.Store.WithMetrics(cfg.Metrics)
	m, err := catchup.OpenMaster(ctx, store, cfg.Policy, cfg.Logger)
	if err != nil {
		return err
	}
	runner, err := cfg.NewRunner(m.Policy())
	if err != nil {
		return err
	}
	reg.MustRegister(catchup.NewRecordsCollector(store, m.Policy()))
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("master.listen %s: %v: %w", cfg.Listen, err, errs.ErrInvalid)
	}
	url := "http://" + lis.Addr().String()
	rep := &replica{m: m, s: store, runner: runner, cfg: cfg, id: cfg.ID, url: cfg.AdvertiseURL, clock: clock.RealClock{},
		led: make(chan struct{})}
	if rep.id == "" {
		host, _ := os.Hostname()
		rep.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if rep.url == "" {
		rep.url = url
	}
	api, err := New(Config{Token: cfg.Token, Catchup: rep, Tables: cfg.WAL, Registry: reg, Gatherer: reg, Logger: cfg.Logger})
	if err != nil {
		lis.Close()
		return err
	}
	if cfg.EndpointFile != "" {
		if err := writeEndpoint(cfg.EndpointFile, url); err != nil {
			lis.Close()
			return err
		}
		defer os.Remove(cfg.EndpointFile)
	}
	p := m.Policy()
	cfg.Logger.Info("master started", "url", url, "id", rep.id, "catchup_enabled", p.Enabled,
		"owned_targets", p.OwnedTargets, "max_jobs", p.MaxJobs)
	if cfg.Started != nil {
		cfg.Started(url)
	}
	err = serve(ctx, lis, api, rep.lead, rep.ready, cfg.ShutdownGrace)
	if err != nil {
		return err
	}
	cfg.Logger.Info("master stopped")
	return nil
}

// serve runs lead (the campaign and the controller) and, once ready, the
// HTTP server (connections wait in the listener's backlog until then)
// until ctx ends or either fails, then shuts the server down within grace
// and joins lead.
func serve(ctx context.Context, lis net.Listener, api http.Handler, lead, ready func(context.Context) error, grace time.Duration) error {
	cctx, stopCtrl := context.WithCancel(ctx)
	defer stopCtrl()
	var wg sync.WaitGroup
	ctrlErr := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); ctrlErr <- lead(cctx) }()
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	srvErr := make(chan error, 1)
	go func() {
		if err := ready(cctx); err != nil {
			lis.Close()
			srvErr <- err
			return
		}
		srvErr <- srv.Serve(lis)
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-srvErr:
	case runErr = <-ctrlErr:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && runErr == nil {
		runErr = err
	}
	stopCtrl()
	wg.Wait()
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}
