package wal

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	corewal "github.com/walctl/walctl/internal/core/wal"
)

// QuarantineOptions of `walctl wal quarantine`.
type QuarantineOptions struct {
	deps
	// WALDir is the WAL directory (the engine opened in-process); JSON
	// says whether the output is JSON (then the next steps stay off stderr).
	WALDir     string
	JSON       func() bool
	Table      string
	Shard      int
	Generation uint64
	Reason     string
	Force      bool
}

// QuarantineOutput is the JSON shape of `wal quarantine`: the audit record,
// the directory holding the moved files, and what an operator does next.
type QuarantineOutput struct {
	corewal.QuarantineResult
	Next string `json:"next"`
}

// NewCmdQuarantine returns `wal quarantine`.
func NewCmdQuarantine(f *cmdutil.Factory, runF func(context.Context, *QuarantineOptions) error) *cobra.Command {
	opts := &QuarantineOptions{deps: newDeps(f), JSON: f.JSON}
	cmd := &cobra.Command{
		Use:   "quarantine --table T --shard S --generation G --reason TEXT [--force]",
		Short: "Move a damaged WAL generation aside, with an audit record (never a repair)",
		Long: `Move the files of one damaged generation of a shard (as listed by walctl doctor,
or named by the exit-6 error of a read) out of the shard, into
<data-dir>/wal/quarantine/<table>/shard-NNNN/gen-<first>-<time>/, with an audit
record AUDIT.json (who, when, why, the positions, the damage found). Every
move is a durable rename; nothing is repaired, rewritten or deleted.

A generation that verifies (every entry's checksum matches) is refused unless
--force. The open generation is always refused (seal it first).

Afterwards the generation's positions stay unreadable: reads and trims that
reach them fail with exit 6 naming the quarantine directory, and they are
never issued again (for a damaged open generation, whose end is unknown, up
to a bound from its index). The shard takes appends again. Publication of the
shard stops before the gap: walctl never skips records. An operator then
decides: restore the two files from a copy (move them back into the shard
directory and delete the quarantine directory; the next open verifies them),
or keep the shard's publication stopped at the gap.

It works on the WAL directory itself (the --data-dir of the WAL host): stop
the process serving it (wal serve, worker run) first.

EXIT STATUS
  0  the generation was moved aside and the audit record written
  2  bad flags
  3  unknown table, shard or generation
  4  the generation verifies (use --force), is open, is already quarantined,
     or another process holds the WAL directory
  5  a move or an fsync failed (the next open puts back files moved without
     an audit record)`,
		Example: `  walctl doctor
  walctl wal quarantine --table orders --shard 2 --generation 1041 --reason "32 bytes flipped, INC-4711"
  walctl wal quarantine --table orders --shard 2 --generation 1041 --reason "restore test" --force --output json`,
		Args: cmdutil.ExactArgs(0, "wal quarantine takes no arguments (use --table, --shard, --generation)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.Table == "":
				return cmdutil.FlagErrorf("--table is required")
			case !cmd.Flags().Changed("shard"):
				return cmdutil.FlagErrorf("--shard is required")
			case opts.Shard < 0:
				return cmdutil.FlagErrorf("--shard must not be negative, got %d", opts.Shard)
			case opts.Generation == 0:
				return cmdutil.FlagErrorf("--generation is required (the generation's first position, as doctor lists it)")
			case opts.Reason == "":
				return cmdutil.FlagErrorf("--reason is required (it is kept in the audit record)")
			case f.Global().WAL != "":
				return cmdutil.FlagErrorf("wal quarantine works on the WAL directory (--data-dir on the WAL host), not through --wal")
			}
			opts.WALDir = f.WALDir()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return quarantineRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmd.Flags().IntVar(&opts.Shard, "shard", 0, "shard")
	cmd.Flags().Uint64Var(&opts.Generation, "generation", 0, "generation ID (its first position)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (kept in the audit record)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "quarantine a sealed generation that verifies")
	return cmd
}

func quarantineRun(ctx context.Context, opts *QuarantineOptions) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	eng, ok := log.(*corewal.Engine)
	if !ok {
		return fmt.Errorf("wal quarantine needs the WAL directory %s, which another process serves: stop it first (the quarantine must not race its appends and reads): %w", opts.WALDir, errs.ErrConflict)
	}
	res, err := eng.Quarantine(ctx, corewal.QuarantineRequest{Table: opts.Table, Shard: opts.Shard, Generation: opts.Generation,
		Force: opts.Force, Reason: opts.Reason, Actor: cmdutil.Actor("wal quarantine")})
	if err != nil {
		return err
	}
	out := QuarantineOutput{QuarantineResult: res, Next: nextSteps(res, filepath.Join(opts.WALDir, "tables", opts.Table, fmt.Sprintf("shard-%04d", opts.Shard)))}
	if err := opts.Print(out, func() *render.Table {
		t := render.NewTable("table", "shard", "generation", "unreadable", "moved to")
		rng := fmt.Sprintf("%d..%d", res.First, res.Last)
		if res.LastIsBound {
			rng += " (upper bound)"
		}
		t.Add(res.Table, fmt.Sprint(res.Shard), fmt.Sprint(res.Generation), rng, res.Dir)
		return t
	}); err != nil {
		return err
	}
	if !opts.JSON() {
		fmt.Fprintln(opts.ErrOut, out.Next)
	}
	return nil
}

func nextSteps(res corewal.QuarantineResult, shardDir string) string {
	return fmt.Sprintf("positions %d..%d of table %s shard %d are now unreadable and will not be issued again; "+
		"publication of the shard stops before position %d. Next: restore the files from a copy (move them from %s back into %s "+
		"and delete that directory; the next open verifies them), or leave the shard stopped at the gap — walctl never skips records",
		res.First, res.Last, res.Table, res.Shard, res.First, res.Dir, shardDir)
}
