// Package worker implements `walctl worker run`.
package worker

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	coreworker "github.com/walctl/walctl/internal/core/worker"
)

// Options of `walctl worker run`: the typed worker configuration and the
// lazy dependencies the verb needs.
type Options struct {
	Config        coreworker.Config
	MetricsListen string

	Logger    *slog.Logger
	WAL       func(context.Context) (wal.Log, error)
	ShareWAL  func(context.Context) error
	Publisher func(context.Context, coord.Owner, ...coord.AcquireOption) (*publish.Publisher, error)
	Coord     func(context.Context) (*coord.Client, error)
	Owner     func(kind string) coord.Owner
	// WithHolders cancels the context when the process whose embedded etcd
	// or WAL this worker borrowed exits.
	WithHolders func(context.Context) (context.Context, context.CancelFunc)
}

// NewCmdWorker returns the `worker` command group.
func NewCmdWorker(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "worker <command>", Short: "Run a materializer worker"}
	cmd.AddCommand(NewCmdRun(f, nil))
	return cmd
}

// NewCmdRun returns `worker run`.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{WAL: f.WAL, ShareWAL: f.ShareLocalWAL, Publisher: f.Publisher, Coord: f.Coord, Owner: f.Owner, WithHolders: f.WithHolders}
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
			c := f.Config
			opts.Logger = f.Logger
			opts.MetricsListen = c.String(cmdutil.KeyWorkerMetricsListen)
			opts.Config = coreworker.Config{
				Tables:              c.StringSlice(cmdutil.KeyWorkerTables),
				MaxConcurrentTables: c.Int(cmdutil.KeyWorkerMaxTables),
				MaxConcurrentRounds: c.Int(cmdutil.KeyWorkerMaxRounds),
				PollInterval:        c.Duration(cmdutil.KeyWorkerPoll),
				Slice:               coord.SlicePolicy{MaxRounds: c.Int(cmdutil.KeyWorkerSliceRounds), MaxDuration: c.Duration(cmdutil.KeyWorkerSliceTime)},
				IdleRelease:         coreworker.IdlePolicy{MaxRounds: c.Int(cmdutil.KeyWorkerIdleRounds)},
				ShutdownGrace:       c.Duration(cmdutil.KeyWorkerGrace),
				LostBackoff:         c.Duration(cmdutil.KeyWorkerLostBackoff),
				ErrorBackoff:        c.Duration(cmdutil.KeyWorkerErrBackoff),
				Logger:              f.Logger,
			}
			if len(opts.Config.Tables) == 0 {
				return cmdutil.FlagErrorf("no tables: give --tables (or worker.tables in the config file, WALCTL_WORKER_TABLES)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.KeyWorkerTables, cmdutil.KeyWorkerMaxTables, cmdutil.KeyWorkerMaxRounds,
		cmdutil.KeyWorkerPoll, cmdutil.KeyWorkerSliceTime, cmdutil.KeyWorkerSliceRounds, cmdutil.KeyWorkerIdleRounds,
		cmdutil.KeyWorkerGrace, cmdutil.KeyWorkerMetricsListen, cmdutil.KeyWorkerLostBackoff, cmdutil.KeyWorkerErrBackoff)
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.PublicationKeys...)
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	return cmd
}

func runRun(ctx context.Context, opts *Options) error {
	reg := prometheus.NewRegistry()
	cfg := opts.Config
	cfg.Metrics = coreworker.NewMetrics(reg)
	if opts.MetricsListen != "" {
		stop, err := coreworker.ServeMetrics(opts.MetricsListen, reg)
		if err != nil {
			return cmdutil.FlagErrorf("--metrics-listen %s: %v", opts.MetricsListen, err)
		}
		defer stop()
		opts.Logger.Info("serving metrics", "addr", opts.MetricsListen)
	}
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	if err := opts.ShareWAL(ctx); err != nil {
		return err
	}
	pub, err := opts.Publisher(ctx, opts.Owner(coord.OwnerWorker), coord.WithSlice(cfg.Slice))
	if err != nil {
		return err
	}
	co, err := opts.Coord(ctx)
	if err != nil {
		return err
	}
	cfg.Log = log
	w := coreworker.New(pub, co, cfg)
	ctx, stop := opts.WithHolders(ctx) // exit, not idle, when the holder of the data dir goes
	defer stop()
	opts.Logger.Info("worker started", "tables", cfg.Tables)
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, cmdutil.ErrHolderGone) {
		return cause
	}
	return nil
}
