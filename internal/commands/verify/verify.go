// Package verify implements `walctl verify`: a table checked against the
// WAL it was published from.
package verify

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/objstore"
	coreverify "github.com/walctl/walctl/internal/core/verify"
	"github.com/walctl/walctl/internal/core/wal"
)

// Options of `walctl verify`.
type Options struct {
	WAL         func(context.Context) (wal.Log, error)
	CallContext func(context.Context) (context.Context, context.CancelFunc)
	Print       func(any, func() *render.Table) error
	ErrOut      io.Writer
	LanceRoot   string
	Store       objstore.Store

	Table   string
	Version uint64
}

// NewCmdVerify returns `walctl verify`.
func NewCmdVerify(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{WAL: f.WAL, CallContext: f.CallContext, Print: f.Print, ErrOut: f.IOStreams.ErrOut}
	cmd := &cobra.Command{
		Use:   "verify --table T [--version N]",
		Short: "Check that every ACKed record is in the table exactly once",
		Long: `Compare a table (its latest version, or --version N, read through walctl's
managed reader: no claim, no epoch, nothing written) with its WAL and report
missing or duplicated records.

Every data file walctl published is checked against its recorded descriptor
(size, checksum, rows); the WAL ranges of the published files must tile each
shard from position 1 up to the table's watermark with neither gaps nor
overlaps; the rows of every file whose WAL range is still retained must equal
the records of that range, each exactly once; no retained record above the
watermark may be in the table; and the WAL must not be trimmed beyond the
watermark. Fragments walctl did not write (official appends) are counted, not
checked.

EXIT STATUS
  0  the table matches the WAL
  3  unknown table
  6  missing, duplicated or altered records, or a damaged data file (the
     report on stdout lists each problem)`,
		Example: "  walctl verify --table orders\n  walctl verify --table orders --output json | jq .problems",
		Args:    cmdutil.ExactArgs(0, "verify takes no arguments (use --table)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Table == "" {
				return cmdutil.FlagErrorf("--table is required")
			}
			opts.LanceRoot = f.Global().LanceRoot
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return verifyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmd.Flags().Uint64Var(&opts.Version, "version", 0, "verify this exact version (default the latest)")
	return cmd
}

func verifyRun(ctx context.Context, opts *Options) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := opts.CallContext(ctx)
	_, err = log.Table(cctx, opts.Table)
	cancel()
	if err != nil {
		return err
	}
	rep, err := coreverify.Table(ctx, log, coreverify.Options{LanceRoot: opts.LanceRoot, Store: opts.Store, Table: opts.Table, Version: opts.Version})
	if err != nil {
		return err
	}
	if err := opts.Print(rep, func() *render.Table { return reportTable(rep) }); err != nil {
		return err
	}
	if rep.OK {
		fmt.Fprintln(opts.ErrOut, rep.Summary())
	}
	return rep.Err()
}

// reportTable renders the summary row per shard, then one row per problem.
func reportTable(rep *coreverify.Report) *render.Table {
	t := render.NewTable("shard", "watermark", "published to", "trimmed", "checked entries", "pending entries", "problem")
	for _, s := range rep.Shards {
		t.Add(fmt.Sprint(s.Shard), fmt.Sprint(s.Watermark), fmt.Sprint(s.PublishedTo), fmt.Sprint(s.TrimmedThrough),
			fmt.Sprint(s.CheckedEntries), fmt.Sprint(s.PendingEntries), "-")
	}
	for _, p := range rep.Problems {
		shard := "-"
		if p.Shard >= 0 {
			shard = fmt.Sprint(p.Shard)
		}
		t.Add(shard, "", "", "", "", "", fmt.Sprintf("%s: %s", p.Kind, p.Detail))
	}
	verdict := "ok"
	if !rep.OK {
		verdict = fmt.Sprintf("FAILED: %d missing, %d duplicated, %d unexpected, %d above watermark", rep.Missing, rep.Duplicated, rep.Unexpected, rep.AboveWatermark)
	}
	t.Add("all", "", "", "", fmt.Sprintf("%d rows", rep.TableRows), fmt.Sprintf("%d compared", rep.CheckedRows), verdict)
	return t
}
