package table

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/lineage"
	"github.com/walctl/walctl/internal/core/objstore"
)

// LocateOptions of `walctl table locate`.
type LocateOptions struct {
	deps
	Store    objstore.Store
	Name     string
	Shard    int
	Position uint64
}

// NewCmdLocate returns `table locate`.
func NewCmdLocate(f *cmdutil.Factory, runF func(context.Context, *LocateOptions) error) *cobra.Command {
	opts := &LocateOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "locate --table T --shard S --position P",
		Short: "Which version and data file hold WAL entry P of shard S",
		Long: `Say where WAL entry P of shard S went: the version that published it, its
plan, the data file and the rows it holds there, and whether that file is
still in the latest version (or which version rewrote it away) — or that it
was never published: "not-published" (ACKed, still in the WAL, above the
watermark), "trimmed" (gone from the WAL and from every retained version) or
"never-written" (beyond the shard's last position).

JSON shape (stable): {"table", "shard", "position", "status", "version",
"plan", "file", "first_row", "rows", "in_latest", "rewritten_in", "wal",
"watermark"}.

EXIT STATUS
  0  the entry was located (whatever its status)
  2  bad flags, or a shard the table does not have
  3  unknown table`,
		Example: `  walctl table locate --table orders --shard 0 --position 1234
  walctl table locate --table orders --shard 1 --position 7 --output json | jq .file`,
		Args: cmdutil.TableArgs("table locate", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("shard") || opts.Position == 0 {
				return cmdutil.FlagErrorf("--shard and --position (from 1) are required")
			}
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return locateRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	cmd.Flags().IntVar(&opts.Shard, "shard", 0, "shard number")
	cmd.Flags().Uint64Var(&opts.Position, "position", 0, "WAL position (from 1)")
	return cmd
}

func locateRun(ctx context.Context, opts *LocateOptions) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := opts.CallContext(ctx)
	defer cancel()
	loc, err := lineage.Locate(cctx, log, opts.Store, opts.Name, opts.Shard, opts.Position)
	if err != nil {
		return err
	}
	return opts.Print(loc, func() *render.Table {
		t := render.NewTable("shard", "position", "status", "version", "plan", "file", "rows", "in latest", "WAL")
		latest := fmt.Sprint(loc.InLatest)
		if loc.RewrittenIn != 0 {
			latest = fmt.Sprintf("no (rewritten in %d)", loc.RewrittenIn)
		}
		rows := "-"
		if loc.FirstRow >= 0 {
			rows = fmt.Sprintf("%d–%d", loc.FirstRow, loc.FirstRow+loc.Rows-1)
		}
		t.Add(fmt.Sprint(loc.Shard), fmt.Sprint(loc.Position), loc.Status, fmt.Sprint(loc.Version), short(loc.Plan),
			orDash(loc.File), rows, latest, loc.WAL)
		return t
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
