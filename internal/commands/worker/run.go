// Package worker implements `walctl worker run`.
package worker

import (
	"context"
	"errors"

	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	coreworker "github.com/walctl/walctl/internal/core/worker"
)

// Settings of the worker.
const (
	KeyTables       = "worker.tables"
	KeyMaxTables    = "worker.max_tables"
	KeyMaxRounds    = "worker.max_rounds"
	KeyPoll         = "worker.poll_interval"
	KeySliceTime    = "worker.slice_duration"
	KeySliceRounds  = "worker.slice_rounds"
	KeyIdleRounds   = "worker.idle_release_rounds"
	KeyGrace        = "worker.shutdown_grace"
	KeyMetricsListe = "worker.metrics_listen"
	KeyLostBackoff  = "worker.lost_backoff"
	KeyErrBackoff   = "worker.error_backoff"
)

func init() {
	cmdutil.Register(
		cmdutil.Setting{Key: KeyTables, Default: []string{}, Usage: "the application-authorized fixed set of tables this worker publishes"},
		cmdutil.Setting{Key: KeyMaxTables, Default: 0, Usage: "tables held at once (0: all of them)"},
		cmdutil.Setting{Key: KeyMaxRounds, Default: 0, Usage: "publication rounds running at once (0: GOMAXPROCS)"},
		cmdutil.Setting{Key: KeyPoll, Default: coreworker.DefaultPollInterval, Usage: "how often an idle or busy table is looked at again"},
		cmdutil.Setting{Key: KeySliceTime, Default: coreworker.DefaultSliceDuration, Usage: "a claim is released after this long (bounded slices)"},
		cmdutil.Setting{Key: KeySliceRounds, Default: 0, Usage: "a claim is released after this many rounds (0: no round limit)"},
		cmdutil.Setting{Key: KeyIdleRounds, Default: coreworker.DefaultIdleReleaseRounds, Usage: "a claim is released after this many consecutive idle rounds"},
		cmdutil.Setting{Key: KeyGrace, Default: coreworker.DefaultShutdownGrace, Usage: "how long admitted rounds may run on after SIGTERM"},
		cmdutil.Setting{Key: KeyMetricsListe, Default: "", Usage: "serve Prometheus metrics on this address (/metrics)"},
		cmdutil.Setting{Key: KeyLostBackoff, Default: coreworker.DefaultLostBackoff, Usage: "how long a table is left to others after this worker lost its claim"},
		cmdutil.Setting{Key: KeyErrBackoff, Default: coreworker.DefaultErrorBackoff, Usage: "cap of the backoff after transient errors (it doubles from the poll interval)"},
	)
}

// Options of `walctl worker run`.
type Options struct {
	F *cmdutil.Factory
}

// NewCmdWorker returns the `worker` command group.
func NewCmdWorker(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "worker <command>", Short: "Run a materializer worker"}
	cmd.AddCommand(NewCmdRun(f, nil))
	return cmd
}

// NewCmdRun returns `worker run`.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "run --tables a,b [--metrics-listen ADDR]",
		Short: "Publish a fixed set of tables from the WAL into Lance, exactly once, until stopped",
		Long: `Run a long-lived materializer for an application-authorized fixed set of
tables. For each table it competes for the claim (a busy table costs etcd
nothing: a local watch-maintained hint is consulted first), advances the
publisher epoch, fences, and publishes sealed WAL generations round after round;
it releases the claim at the end of its bounded slice or when the table stays
idle, so ownership moves. On losing a claim it stops publishing that table at
once. Concurrent tables and rounds are bounded, and all tables share one memory
budget and one WAL client pool.

With the in-process WAL (no --wal), the worker also serves it on a loopback
port, so other walctl commands on the same data dir can append to it.

On SIGTERM or SIGINT it stops taking work, lets admitted rounds finish (within
worker.shutdown_grace), joins lease renewal, releases its claims and exits 0.`,
		Example: `  walctl worker run --tables orders,events
  walctl worker run --tables orders --metrics-listen 127.0.0.1:9090 --etcd-endpoints 10.0.0.5:2379 --wal 10.0.0.6:7070
  WALCTL_WORKER_TABLES=orders walctl worker run`,
		Args: cmdutil.ExactArgs(0, "worker run takes no arguments (use --tables)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(f.Config.StringSlice(KeyTables)) == 0 {
				return cmdutil.FlagErrorf("no tables: give --tables (or worker.tables in the config file, WALCTL_WORKER_TABLES)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddSettingFlags(cmd.Flags(), KeyTables, KeyMaxTables, KeyMaxRounds, KeyPoll, KeySliceTime, KeySliceRounds, KeyIdleRounds, KeyGrace, KeyMetricsListe, KeyLostBackoff, KeyErrBackoff,
		cmdutil.KeyPipeline, cmdutil.KeyMemoryBudget)
	return cmd
}

func runRun(ctx context.Context, opts *Options) error {
	f := opts.F
	cfg := f.Config
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := coreworker.NewMetrics(reg)
	if addr := cfg.String(KeyMetricsListe); addr != "" {
		stop, err := serveMetrics(addr, reg)
		if err != nil {
			return err
		}
		defer stop()
		f.Logger.Info("serving metrics", "addr", addr)
	}
	log, err := f.WAL(ctx)
	if err != nil {
		return err
	}
	if err := f.ShareLocalWAL(ctx); err != nil {
		return err
	}
	slice := coord.SlicePolicy{MaxRounds: cfg.Int(KeySliceRounds), MaxDuration: cfg.Duration(KeySliceTime)}
	pub, err := f.Publisher(ctx, f.Owner(coord.OwnerWorker), coord.WithSlice(slice))
	if err != nil {
		return err
	}
	co, err := f.Coord(ctx)
	if err != nil {
		return err
	}
	w := coreworker.New(pub, co, coreworker.Config{
		Tables:              cfg.StringSlice(KeyTables),
		MaxConcurrentTables: cfg.Int(KeyMaxTables),
		MaxConcurrentRounds: cfg.Int(KeyMaxRounds),
		PollInterval:        cfg.Duration(KeyPoll),
		Slice:               slice,
		IdleRelease:         coreworker.IdlePolicy{MaxRounds: cfg.Int(KeyIdleRounds)},
		ShutdownGrace:       cfg.Duration(KeyGrace),
		LostBackoff:         cfg.Duration(KeyLostBackoff),
		ErrorBackoff:        cfg.Duration(KeyErrBackoff),
		Log:                 log,
		Logger:              f.Logger,
		Metrics:             metrics,
	})
	ctx, stop := f.WithHolders(ctx) // exit, not idle, when the holder of the data dir goes
	defer stop()
	f.Logger.Info("worker started", "tables", cfg.StringSlice(KeyTables))
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, cmdutil.ErrHolderGone) {
		return cause
	}
	return nil
}

func serveMetrics(addr string, reg *prometheus.Registry) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cmdutil.FlagErrorf("--metrics-listen %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
