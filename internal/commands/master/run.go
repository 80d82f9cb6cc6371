// Package master implements `walctl master run`: the catch-up API, the
// periodic backlog scan and the catch-up controller.
package master

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	catchupcmd "github.com/walctl/walctl/internal/commands/catchup"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/watermarks"
	coremaster "github.com/walctl/walctl/internal/core/master"
	"github.com/walctl/walctl/internal/core/objstore"
)

// Settings of the master.
const (
	KeyListen        = "master.listen"
	KeyRunner        = "master.runner"
	KeyScanInterval  = "master.scan_interval"
	KeyLocalGrace    = "master.local_grace"
	KeyShutdownGrace = "master.shutdown_grace"
	KeyNamespace     = "master.namespace"
	KeyJobTemplate   = "master.job_template"
	KeyJobCPU        = "master.job_cpu"
	KeyJobMemory     = "master.job_memory"
	KeyLeaderTTL     = "master.leader_ttl"
	KeyAdvertiseURL  = "master.advertise_url"
)

func init() {
	cmdutil.Register(
		cmdutil.Setting{Key: KeyListen, Default: "127.0.0.1:7460", Usage: "address of the master API (host:port; port 0 picks one)"},
		cmdutil.Setting{Key: KeyRunner, Default: "local", Usage: "catch-up Job runner: local (child processes) or kubernetes"},
		cmdutil.Setting{Key: KeyScanInterval, Default: time.Duration(0), Usage: "backlog scan interval (0: catchup.observe_interval)"},
		cmdutil.Setting{Key: KeyLocalGrace, Default: 30 * time.Second, Usage: "local runner: SIGTERM to SIGKILL grace of a terminated executor"},
		cmdutil.Setting{Key: KeyShutdownGrace, Default: 10 * time.Second, Usage: "how long in-flight API requests may run on after SIGTERM"},
		cmdutil.Setting{Key: KeyNamespace, Default: "", Usage: "kubernetes runner: namespace of the catch-up Jobs"},
		cmdutil.Setting{Key: KeyJobTemplate, Default: "", Usage: "kubernetes runner: reviewed Job template file (pinned image)"},
		cmdutil.Setting{Key: KeyJobCPU, Default: "1", Usage: "kubernetes runner: CPU request and limit of an executor"},
		cmdutil.Setting{Key: KeyJobMemory, Default: "2Gi", Usage: "kubernetes runner: memory request and limit of an executor"},
		cmdutil.Setting{Key: KeyLeaderTTL, Default: catchup.DefaultLeaderTTL, Usage: "lease of the catch-up leader election: a leader that cannot renew it for this long stops acting (whole seconds)"},
		cmdutil.Setting{Key: KeyAdvertiseURL, Default: "", Usage: "API URL followers hand to clients while this master leads (default: the URL it listens on)"},
	)
}

// Options of `walctl master run`: the typed settings and the lazy
// dependencies the daemon needs.
type Options struct {
	// WAL opens the WAL (shared with the executors when it is local).
	WAL func(context.Context) (coremaster.WAL, error)
	// Store opens the catch-up records on the configured etcd.
	Store func(context.Context) (*catchup.Store, error)
	// NewRunner builds the configured Job runner for the stored policy.
	NewRunner func(context.Context, catchup.Policy) (catchup.Runner, error)
	Logger    *slog.Logger
	Policy    catchup.Policy
	LanceRoot string
	// LanceStore is the lance root's store (nil: the directory LanceRoot).
	LanceStore   func(context.Context) (objstore.Store, error)
	DataDir      string
	Listen       string
	Token        string
	ScanInterval time.Duration
	Grace        time.Duration
	LeaderTTL    time.Duration
	AdvertiseURL string
}

// NewCmdMaster returns the `master` command group.
func NewCmdMaster(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "master <command>", Short: "Run the master: catch-up API, backlog scan and controller"}
	cmd.AddCommand(NewCmdRun(f, nil))
	return cmd
}

// NewCmdRun returns `master run`.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{}
	cmd := &cobra.Command{
		Use:   "run [--listen ADDR]",
		Short: "Serve the catch-up API, scan the backlog and drive catch-up Jobs until stopped",
		Long: `Run the master: an HTTP API for catch-up requests, a periodic backlog scan
(per table: pending sealed generations, bytes, oldest age, stored in etcd) and
the catch-up controller, which admits Jobs for owned targets (from the scan or
the API, one admission path), starts them, observes their progress, cancels a
stalled Job by CAS and releases its slot once every process has ended.

The policy (catchup.*; see 'walctl config show') is persisted in etcd on the
first start; a master with a different policy refuses to start (exit 4): compare
with 'walctl catchup policy show', change the stored one with 'walctl catchup
policy set' (CAS, audited), then restart every master with it. Catch-up is off
unless catchup.enabled is set, and only the tables in catchup.owned_targets are
ever caught up.

Jobs run as child processes ('walctl catchup run', master.runner local, the
default) or as Kubernetes Jobs (master.runner kubernetes, with master.namespace,
master.job_template — a reviewed template with a pinned image — and a shared
etcd and WAL server; the API is reached in-cluster, or at master.kube_api with
master.kube_token_file and master.kube_ca_file).

API (bearer token from master.token / WALCTL_MASTER_TOKEN, required):
  POST /api/v1/catchup          {"target", "reason", "dry_run"} → admission decision
  GET  /api/v1/catchup?target=T status (Job identity, slot, progress, outcome)
  POST /api/v1/catchup/cancel   {"target", "reason"} → status
  GET  /healthz, GET /metrics   no token
Request bodies are limited to 16 KiB; unknown fields and any field supplying a
Pod spec, image, command or force flag are refused with 400.

Several masters (one etcd, one WAL, their own data dirs) elect one catch-up
leader through etcd (master.leader_ttl): only the leader scans, admits, observes
and cancels, and every write of its controller is guarded by its election key
in the same etcd transaction, so a paused, deposed leader's late write is
refused (walctl_catchup_leader_refused_writes_total). A follower serves status
and answers admissions and cancellations with 503, code "not_leader" and the
leader's URL (master.advertise_url; the catch-up clients follow it once).

The API URL is written to <data-dir>/master/ENDPOINT for the catch-up clients.
On SIGTERM or SIGINT it stops accepting requests, lets in-flight ones finish
(master.shutdown_grace), stops the controller and exits 0; running Jobs are left
to finish and a restarted master reconciles them from etcd.`,
		Example: `  WALCTL_MASTER_TOKEN=s3cret walctl master run --enabled --owned-targets orders
  WALCTL_MASTER_TOKEN=s3cret WALCTL_CATCHUP_ENABLED=true walctl master run --listen 0.0.0.0:7460`,
		Args: cmdutil.ExactArgs(0, "master run takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(f.Config.String(catchupcmd.KeyMasterToken)) == "" {
				return cmdutil.FlagErrorf("no API token: set WALCTL_MASTER_TOKEN (or master.token in the config file)")
			}
			switch r := f.Config.String(KeyRunner); r {
			case "local":
			case "kubernetes":
				if err := validateKube(f.Config); err != nil {
					return err
				}
			default:
				return cmdutil.FlagErrorf("--runner must be local or kubernetes, not %q", r)
			}
			fillOptions(opts, f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddSettingFlags(cmd.Flags(), append([]string{KeyListen, KeyAdvertiseURL, KeyLeaderTTL, KeyRunner, KeyScanInterval, KeyLocalGrace,
		KeyShutdownGrace, KeyNamespace, KeyJobTemplate, KeyJobCPU, KeyJobMemory, KeyKubeAPI, KeyKubeTokenFile, KeyKubeCAFile, KeyJobS3Secret},
		catchupcmd.PolicyKeys...)...)
	return cmd
}

// fillOptions copies the settings and the lazy dependencies from the
// factory, once the configuration is loaded.
func fillOptions(opts *Options, f *cmdutil.Factory) {
	cfg := f.Config
	g := cfg.Global
	*opts = Options{
		WAL: func(ctx context.Context) (coremaster.WAL, error) {
			log, err := f.WAL(ctx)
			if err != nil {
				return nil, err
			}
			return log, f.ShareLocalWAL(ctx)
		},
		Store: func(ctx context.Context) (*catchup.Store, error) {
			co, err := f.Coord(ctx)
			if err != nil {
				return nil, err
			}
			return catchup.NewStore(co, catchup.StoreOptions{CallTimeout: f.Timeout()}), nil
		},
		NewRunner:  func(ctx context.Context, p catchup.Policy) (catchup.Runner, error) { return newRunner(ctx, f, p) },
		LanceStore: f.LanceStore,
		Logger:     f.Logger, Policy: catchupcmd.PolicyFromConfig(cfg), LanceRoot: g.LanceRoot, DataDir: g.DataDir,
		Listen: cfg.String(KeyListen), Token: cfg.String(catchupcmd.KeyMasterToken),
		ScanInterval: cfg.Duration(KeyScanInterval), Grace: cfg.Duration(KeyShutdownGrace),
		LeaderTTL: cfg.Duration(KeyLeaderTTL), AdvertiseURL: cfg.String(KeyAdvertiseURL),
	}
}

func runRun(ctx context.Context, opts *Options) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	store, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	var root objstore.Store
	if opts.LanceStore != nil {
		if root, err = opts.LanceStore(ctx); err != nil {
			return err
		}
	}
	return coremaster.Run(ctx, coremaster.RunConfig{
		Store: store, Policy: opts.Policy,
		NewRunner: func(p catchup.Policy) (catchup.Runner, error) { return opts.NewRunner(ctx, p) },
		WAL:       log, Watermarks: watermarks.FromStore(cmdutil.RootStore(root, opts.LanceRoot)), ScanInterval: opts.ScanInterval,
		Listen: opts.Listen, EndpointFile: coremaster.EndpointFile(opts.DataDir), Token: opts.Token,
		ShutdownGrace: opts.Grace, Logger: opts.Logger, LeaderTTL: opts.LeaderTTL, AdvertiseURL: opts.AdvertiseURL,
	})
}
