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
		Short: "Audit a table: every ACKed record is in it exactly once",
		Long: `Audit a table (its latest version, or --version N, read through walctl's
managed reader: no claim, no epoch, nothing written) against its WAL.

For every shard, the multiset of records in the table must equal the
multiset of ACKed records from position 1 to the table's watermark, whatever
happened to the fragments since they were published (compaction, official
appends, deletions, which are honoured): records the WAL still retains are
compared one by one, trimmed positions by the digests walctl recorded beside
each plan (a count and an order-independent hash of the records, written
before anything could be trimmed; rows are hashed by the table's row hash,
"row_hash" in the JSON report, recorded at its first publication). Rows
another writer appended are foreign; a foreign row equal to an ACKed record
is a duplicate. A missing or duplicated record is named by shard and
position where the WAL, or the walctl file that held it, says. Every data
file walctl published is also checked against its descriptor (size,
checksum), no retained record above the watermark may be in the table, and
the WAL must not be trimmed beyond the watermark. The summary says what was
compared and how: "compared N records with the WAL, M by digest, K foreign
rows".

EXIT STATUS
  0  the table matches the WAL
  3  unknown table
  6  missing, duplicated or unexpected records, trimmed positions without a
     digest, or a damaged data file (the report on stdout lists each problem)`,
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
	t := render.NewTable("shard", "watermark", "trimmed", "by digest", "by WAL", "pending entries", "problem")
	for _, s := range rep.Shards {
		t.Add(fmt.Sprint(s.Shard), fmt.Sprint(s.Watermark), fmt.Sprint(s.TrimmedThrough),
			fmt.Sprintf("1–%d: %d records", s.DigestThrough, s.DigestRecords), fmt.Sprintf("%d records", s.WALRecords),
			fmt.Sprint(s.PendingEntries), "-")
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
	t.Add("all", "", "", fmt.Sprintf("%d records", rep.ComparedDigest), fmt.Sprintf("%d records", rep.ComparedWAL),
		fmt.Sprintf("%d rows, %d foreign", rep.TableRows, rep.ForeignRows), verdict)
	return t
}
