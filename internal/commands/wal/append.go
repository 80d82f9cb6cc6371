package wal

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/ingest"
)

// AppendOptions of `walctl wal append`.
type AppendOptions struct {
	deps
	ReadInput func(path string) ([]byte, error)
	Table     string
	Shard     int
	File      string
	Format    string
	BatchRows int
}

// AppendResult is the JSON shape of `wal append`.
type AppendResult struct {
	Table   string            `json:"table"`
	Shard   int               `json:"shard"`
	Entries []ingest.Appended `json:"entries"`
	Rows    int64             `json:"rows"`
}

// NewCmdAppend returns `wal append`.
func NewCmdAppend(f *cmdutil.Factory, runF func(context.Context, *AppendOptions) error) *cobra.Command {
	opts := &AppendOptions{deps: newDeps(f), ReadInput: f.ReadInput}
	cmd := &cobra.Command{
		Use:   "append --table T --shard S FILE",
		Short: "Append record batches from an Arrow IPC stream or JSON lines",
		Long: `Append the record batches of FILE (- for stdin) to one shard of a table. Each
Arrow record batch becomes one WAL entry, ACKed once durable; JSON lines are
converted with the table's schema into batches of --batch-rows rows.

The whole input is read and checked against the table's schema before anything
is appended: a malformed stream or a schema mismatch writes nothing (exit 2).`,
		Example: `  walctl wal append --table orders --shard 0 batch.arrows
  printf '{"id": 1, "body": "hello"}\n' | walctl wal append --table orders --shard 0 --format jsonl -`,
		Args: cmdutil.ExactArgs(1, "wal append needs one input file (- for stdin)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if opts.Table == "" {
				return cmdutil.FlagErrorf("--table is required")
			}
			if opts.Shard < 0 {
				return cmdutil.FlagErrorf("--shard must not be negative, got %d", opts.Shard)
			}
			switch opts.Format {
			case ingest.FormatAuto, ingest.FormatArrow, ingest.FormatJSONL:
			default:
				return cmdutil.FlagErrorf("--format must be auto, arrow or jsonl, not %q", opts.Format)
			}
			if opts.BatchRows < 1 {
				return cmdutil.FlagErrorf("--batch-rows must be at least 1")
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return appendRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmd.Flags().IntVar(&opts.Shard, "shard", 0, "shard to append to")
	cmd.Flags().StringVar(&opts.Format, "format", "auto", "input format: auto, arrow (IPC stream or file) or jsonl")
	cmd.Flags().IntVar(&opts.BatchRows, "batch-rows", 1024, "rows per entry when converting JSON lines")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	return cmd
}

func appendRun(ctx context.Context, opts *AppendOptions) error {
	data, err := opts.ReadInput(opts.File)
	if err != nil {
		return err
	}
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	entries, err := ingest.Append(ctx, log, ingest.Request{Table: opts.Table, Shard: opts.Shard, Data: data,
		Format: opts.Format, BatchRows: opts.BatchRows, CallTimeout: opts.Timeout})
	if err != nil {
		return fmt.Errorf("%s: %w", opts.File, err)
	}
	res := AppendResult{Table: opts.Table, Shard: opts.Shard, Entries: entries}
	for _, e := range entries {
		res.Rows += e.Rows
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("table", "shard", "position", "rows")
		for _, e := range res.Entries {
			t.Add(res.Table, fmt.Sprint(res.Shard), fmt.Sprint(e.Position), fmt.Sprint(e.Rows))
		}
		return t
	})
}
