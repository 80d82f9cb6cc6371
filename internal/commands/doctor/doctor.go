// Package doctor implements `walctl doctor`.
package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/health"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/wal"
)

// Options of `walctl doctor`: the configuration it checks and the lazy
// dependencies.
type Options struct {
	Global    cmdutil.Global
	WALTarget string
	LanceRoot string
	// Store is the lance root's store (nil: the directory LanceRoot).
	Store       objstore.Store
	CallContext func(context.Context) (context.Context, context.CancelFunc)
	WAL         func(context.Context) (wal.Log, error)
	Print       func(any, func() *render.Table) error
	// ProbeStore checks the lance root's conditional requests
	// (Factory.ProbeLanceStore).
	ProbeStore func(context.Context) error

	// EtcdEndpoints starts the embedded etcd when configured; Etcd dials.
	EtcdEndpoints func(context.Context) ([]string, error)
	Etcd          func(context.Context) (*clientv3.Client, error)
}

// Result is the JSON shape of `walctl doctor`.
type Result struct {
	OK     bool           `json:"ok"`
	Checks []health.Check `json:"checks"`
}

// NewCmdDoctor returns `walctl doctor`.
func NewCmdDoctor(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{CallContext: f.CallContext, WAL: f.WAL, Print: f.Print, EtcdEndpoints: f.EtcdEndpoints, Etcd: f.Etcd}
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check every configured dependency and print one row per check",
		Long: `Check each dependency walctl is configured to use — every etcd endpoint (version
and leader), the data directory and the Lance root (writable), the WAL (the
server named by --wal or the in-process one: it must answer within
--command-timeout) — and, per table, that the published watermark is not behind
the WAL's trimmed point. Print one row per check with its status, latency and,
for a failure, a hint. Exits non-zero when any check fails, with the code of
the first failure (5 for an unreachable dependency, 6 for a table whose WAL was
trimmed beyond what it published).`,
		Example: `  walctl doctor
  walctl --embedded doctor
  WALCTL_ETCD_ENDPOINTS=10.0.0.5:2379 walctl doctor --command-timeout 3s --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g := f.Global()
			opts.Global, opts.LanceRoot, opts.WALTarget = g, g.LanceRoot, g.WAL
			opts.ProbeStore = f.ProbeLanceStore
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if opts.WALTarget == "" {
				opts.WALTarget = "in-process (" + f.WALDir() + ")"
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return doctorRun(cmd.Context(), opts)
		},
	}
}

func doctorRun(ctx context.Context, opts *Options) error {
	g := opts.Global
	checks := []health.Check{
		health.WritableDir("data-dir", g.DataDir),
	}
	checks = append(checks, storeChecks(ctx, opts)...)
	checks = append(checks, etcdChecks(ctx, opts)...)
	checks = append(checks, walChecks(ctx, opts)...)
	checks = append(checks, walDamageChecks(ctx, opts)...)

	res := Result{OK: health.Failed(checks) == nil, Checks: checks}
	if err := opts.Print(res, func() *render.Table {
		t := render.NewTable("check", "target", "status", "latency", "detail")
		t.Status = 2
		for _, c := range checks {
			detail := c.Detail
			if c.Hint != "" {
				detail += " — hint: " + c.Hint
			}
			t.Add(c.Name, c.Target, c.Status, c.Latency.Round(time.Microsecond).String(), detail)
		}
		return t
	}); err != nil {
		return err
	}
	return health.Failed(checks)
}

func etcdChecks(ctx context.Context, opts *Options) []health.Check {
	g := opts.Global
	target := strings.Join(g.EtcdEndpoints, ",")
	if g.Embedded {
		target = "embedded (" + g.DataDir + "/etcd)"
	}
	fail := func(err error) []health.Check {
		return []health.Check{{Name: "etcd", Target: target, Status: health.Fail, Detail: err.Error(), Err: err,
			Hint: "check --etcd-endpoints, --data-dir and that no other process misuses the directory"}}
	}
	eps, err := opts.EtcdEndpoints(ctx)
	if err != nil {
		return fail(err)
	}
	cli, err := opts.Etcd(ctx)
	if err != nil {
		return fail(err)
	}
	var out []health.Check
	for _, ep := range eps {
		cctx, cancel := opts.CallContext(ctx)
		c := health.Etcd(cctx, cli, ep)
		cancel()
		if g.Embedded {
			c.Name = "etcd (embedded)"
		}
		out = append(out, c)
	}
	return out
}

// walDamageChecks lists the WAL's damaged and quarantined generations, one
// failing row each (exit 6), or one ok row when there are none. A WAL that
// cannot be reached is left to the WAL check.
func walDamageChecks(ctx context.Context, opts *Options) []health.Check {
	start := time.Now()
	log, err := opts.WAL(ctx)
	if err != nil {
		return nil
	}
	var reports []wal.DamageReport
	if eng, ok := log.(interface{ Damage() []wal.DamageReport }); ok {
		reports = eng.Damage()
	} else {
		cctx, cancel := opts.CallContext(ctx)
		defer cancel()
		tables, err := log.Tables(cctx)
		if err != nil {
			return nil
		}
		for _, t := range tables {
			st, err := log.Stats(cctx, t.Name, nil)
			if err != nil {
				continue
			}
			for _, sh := range st.Shards {
				reports = append(reports, sh.Damage...)
			}
		}
	}
	if len(reports) == 0 {
		return []health.Check{{Name: "wal damage", Target: "every table", Status: health.OK, Latency: time.Since(start), Detail: "no damaged or quarantined generations"}}
	}
	var out []health.Check
	for _, d := range reports {
		target := fmt.Sprintf("%s shard %d generation %d", d.Table, d.Shard, d.Generation)
		if d.Shard < 0 {
			target = d.Table + " registration"
		}
		c := health.Check{Name: "wal damage", Target: target,
			Status: health.Fail, Latency: time.Since(start), Detail: d.String(), Err: fmt.Errorf("%s: %w", d, wal.ErrCorruptEntry)}
		switch {
		case d.Quarantined != "":
			c.Hint = "the shard's publication stops before the gap: restore the files from a copy into the shard directory and delete the quarantine directory, or keep it stopped"
		case d.Generation == 0 || d.Shard < 0:
			c.Hint = "not a whole generation: inspect the file named; walctl cannot quarantine it"
		default:
			c.Hint = fmt.Sprintf("walctl wal quarantine --table %s --shard %d --generation %d --reason TEXT", d.Table, d.Shard, d.Generation)
		}
		out = append(out, c)
	}
	return out
}
