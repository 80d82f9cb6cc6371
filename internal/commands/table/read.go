package table

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
)

// ReadOptions of `walctl table read`.
type ReadOptions struct {
	deps
	LanceRoot string
	Store     objstore.Store
	Name      string
	Version   uint64
	Published bool
	Columns   []string
	Limit     int
	CountOnly bool
}

// ReadResult is the JSON shape of `table read`.
type ReadResult struct {
	Table      string             `json:"table"`
	Version    uint64             `json:"version"`
	Epoch      uint64             `json:"epoch"`
	Watermarks publish.Watermarks `json:"watermarks"`
	RowCount   int64              `json:"row_count"`
	Rows       []json.RawMessage  `json:"rows,omitempty"`
}

// NewCmdRead returns `table read`.
func NewCmdRead(f *cmdutil.Factory, runF func(context.Context, *ReadOptions) error) *cobra.Command {
	opts := &ReadOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "read --table T [--version N | --published] [--columns a,b] [--limit N] [--count]",
		Short: "Read a selected version of a table (managed reader: no claim, no epoch)",
		Long: `Open one version of a table read-only — the latest, an exact --version, or with
--published the latest version walctl published data in — and print its rows.
Reading takes no claim and no epoch and never writes. With --output json the
rows are JSON objects (all of them unless --limit); the table view shows the
first --limit rows (default 20).`,
		Example: `  walctl table read --table orders --limit 5
  walctl table read --table orders --version 12 --columns id,ts --output json
  walctl table read --table orders --published --count`,
		Args: cmdutil.TableArgs("table read", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.LanceRoot = f.Global().LanceRoot
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if opts.Version != 0 && opts.Published {
				return cmdutil.FlagErrorf("--version and --published exclude each other")
			}
			if !cmd.Flags().Changed("limit") && !f.JSON() {
				opts.Limit = 20
			}
			if opts.Limit < 0 {
				return cmdutil.FlagErrorf("--limit must not be negative")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return readRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	cmd.Flags().Uint64Var(&opts.Version, "version", 0, "read this exact version")
	cmd.Flags().BoolVar(&opts.Published, "published", false, "read the latest version walctl published data in")
	cmd.Flags().StringSliceVar(&opts.Columns, "columns", nil, "columns to read (default all)")
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "rows to print (0: all)")
	cmd.Flags().BoolVar(&opts.CountOnly, "count", false, "print only the row count")
	return cmd
}

func readRun(ctx context.Context, opts *ReadOptions) error {
	r, err := publish.OpenReaderOn(cmdutil.RootStore(opts.Store, opts.LanceRoot), opts.Name, publish.Selection{Version: opts.Version, Published: opts.Published})
	if err != nil {
		return err
	}
	res := ReadResult{Table: opts.Name, Version: r.Manifest.Version, Epoch: r.State.Epoch, Watermarks: r.State.Watermarks}
	var schema *arrow.Schema
	err = r.Scan(ctx, opts.Columns, func(b arrow.RecordBatch) error {
		schema = b.Schema()
		res.RowCount += b.NumRows()
		if opts.CountOnly {
			return nil
		}
		for i := 0; i < int(b.NumRows()) && (opts.Limit == 0 || len(res.Rows) < opts.Limit); i++ {
			row, err := rowJSON(b, i)
			if err != nil {
				return err
			}
			res.Rows = append(res.Rows, row)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "table %s version %d (epoch %d): %d rows\n", res.Table, res.Version, res.Epoch, res.RowCount)
	return opts.Print(res, func() *render.Table {
		if opts.CountOnly || schema == nil {
			t := render.NewTable("table", "version", "rows")
			t.Add(res.Table, fmt.Sprint(res.Version), fmt.Sprint(res.RowCount))
			return t
		}
		var names []string
		for _, fl := range schema.Fields() {
			names = append(names, fl.Name)
		}
		t := render.NewTable(names...)
		for _, raw := range res.Rows {
			var obj map[string]json.RawMessage
			_ = json.Unmarshal(raw, &obj)
			cells := make([]string, len(names))
			for i, n := range names {
				cells[i] = cell(obj[n])
			}
			t.Add(cells...)
		}
		return t
	})
}

// rowJSON renders row i of b as a JSON object, in schema order.
func rowJSON(b arrow.RecordBatch, i int) (json.RawMessage, error) {
	var sb strings.Builder
	sb.WriteByte('{')
	for c, fl := range b.Schema().Fields() {
		if c > 0 {
			sb.WriteByte(',')
		}
		k, _ := json.Marshal(fl.Name)
		sb.Write(k)
		sb.WriteByte(':')
		v, err := json.Marshal(b.Column(c).GetOneForMarshal(i))
		if err != nil {
			return nil, fmt.Errorf("column %s row %d: %w", fl.Name, i, err)
		}
		sb.Write(v)
	}
	sb.WriteByte('}')
	return json.RawMessage(sb.String()), nil
}

func cell(raw json.RawMessage) string {
	s := string(raw)
	if s == "" {
		return "null"
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		s = str
	}
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}
