package walcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
)

// AppendOptions of `walctl wal append`.
type AppendOptions struct {
	F         *cmdutil.Factory
	Table     string
	Shard     int
	File      string
	Format    string
	BatchRows int
}

// AppendResult is the JSON shape of `wal append`.
type AppendResult struct {
	Table   string          `json:"table"`
	Shard   int             `json:"shard"`
	Entries []AppendedEntry `json:"entries"`
	Rows    int64           `json:"rows"`
}

// AppendedEntry is one ACKed entry.
type AppendedEntry struct {
	Position uint64 `json:"position"`
	Rows     int64  `json:"rows"`
}

// NewCmdAppend returns `wal append`.
func NewCmdAppend(f *cmdutil.Factory, runF func(context.Context, *AppendOptions) error) *cobra.Command {
	opts := &AppendOptions{F: f}
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
			case "auto", "arrow", "jsonl":
			default:
				return cmdutil.FlagErrorf("--format must be auto, arrow or jsonl, not %q", opts.Format)
			}
			if opts.BatchRows < 1 {
				return cmdutil.FlagErrorf("--batch-rows must be at least 1")
			}
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
	return cmd
}

func appendRun(ctx context.Context, opts *AppendOptions) error {
	f := opts.F
	data, err := f.ReadInput(opts.File)
	if err != nil {
		return err
	}
	log, info, err := f.TableInfo(ctx, opts.Table)
	if err != nil {
		return err
	}
	if opts.Shard >= info.Shards {
		return fmt.Errorf("table %s has %d shard(s); shard %d does not exist: %w", opts.Table, info.Shards, opts.Shard, errs.ErrInvalid)
	}
	batches, err := decode(data, opts.Format, info.Schema, opts.BatchRows)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.File, err)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for i, b := range batches { // the WAL validates each too; this refuses the file before any is ACKed
		if err := arrowcheck.Batch(info.Schema, b); err != nil {
			return fmt.Errorf("%s: batch %d of %d: %w", opts.File, i+1, len(batches), err)
		}
	}
	res := AppendResult{Table: opts.Table, Shard: opts.Shard, Entries: []AppendedEntry{}}
	for _, b := range batches {
		cctx, cancel := f.CallContext(ctx)
		pos, err := log.Append(cctx, opts.Table, opts.Shard, b)
		cancel()
		if err != nil {
			return fmt.Errorf("append entry %d of %d (%d already ACKed, last position %d): %w",
				len(res.Entries)+1, len(batches), len(res.Entries), lastPos(res), err)
		}
		res.Entries = append(res.Entries, AppendedEntry{Position: pos, Rows: b.NumRows()})
		res.Rows += b.NumRows()
	}
	return f.Print(res, func() *render.Table {
		t := render.NewTable("table", "shard", "position", "rows")
		for _, e := range res.Entries {
			t.Add(res.Table, fmt.Sprint(res.Shard), fmt.Sprint(e.Position), fmt.Sprint(e.Rows))
		}
		return t
	})
}

func lastPos(r AppendResult) uint64 {
	if len(r.Entries) == 0 {
		return 0
	}
	return r.Entries[len(r.Entries)-1].Position
}

// decode reads every batch of the input and checks it against schema before
// any is appended.
func decode(data []byte, format string, schema *arrow.Schema, batchRows int) ([]arrow.RecordBatch, error) {
	if format == "auto" {
		format = "arrow"
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			format = "jsonl"
		}
	}
	var out []arrow.RecordBatch
	fail := func(err error) ([]arrow.RecordBatch, error) {
		for _, b := range out {
			b.Release()
		}
		return nil, err
	}
	if format == "jsonl" {
		r := array.NewJSONReader(bufio.NewReader(bytes.NewReader(data)), schema, array.WithChunk(batchRows))
		defer r.Release()
		for r.Next() {
			b := r.RecordBatch()
			b.Retain()
			out = append(out, b)
		}
		if err := r.Err(); err != nil {
			return fail(fmt.Errorf("JSON lines do not match the table schema: %v: %w", err, errs.ErrInvalid))
		}
		return out, nil
	}
	// An IPC file is read as the stream it embeds; lengths the input
	// declares are bounded by the input (arrowcheck.NewStreamReader).
	sr, err := arrowcheck.NewStreamReader(data)
	if err != nil {
		return nil, fmt.Errorf("malformed Arrow IPC stream: %v: %w", err, errs.ErrInvalid)
	}
	defer sr.Release()
	for sr.Next() {
		b := sr.RecordBatch()
		b.Retain()
		out = append(out, b)
	}
	if err := sr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fail(fmt.Errorf("malformed Arrow IPC stream after %d batch(es): %v: %w", len(out), err, errs.ErrInvalid))
	}
	if len(out) > 0 && !out[0].Schema().Equal(schema) {
		return fail(fmt.Errorf("input schema %s differs from the table schema %s: %w", out[0].Schema(), schema, errs.ErrInvalid))
	}
	return out, nil
}
