// Package epoch implements `walctl epoch`.
package epoch

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
)

// NewCmdEpoch returns the `epoch` command group.
func NewCmdEpoch(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "epoch <command>",
		Short: "Inspect publisher epochs (the fencing tokens)",
	}
	cmd.AddCommand(NewCmdShow(f, nil))
	return cmd
}

// ShowOptions of `walctl epoch show`.
type ShowOptions struct {
	F     *cmdutil.Factory
	Table string
}

// Row is one table in the output of `epoch show`.
type Row struct {
	Table    string `json:"table"`
	WALEpoch uint64 `json:"wal_epoch"`
}

// NewCmdShow returns `epoch show`.
func NewCmdShow(f *cmdutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{F: f}
	cmd := &cobra.Command{
		Use:   "show [TABLE]",
		Short: "Show each table's publisher epoch as held durably in the WAL",
		Long: `Show the publisher epoch of one table (or every table) as the WAL holds it.
Becoming a table's publisher advances this epoch by compare-and-swap; every
Lance commit is checked against it.`,
		Example: "  walctl epoch show\n  walctl epoch show orders --output json",
		Args:    cmdutil.MaxArgs(1, "epoch show takes at most one table"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if opts.Table != "" && opts.Table != args[0] {
					return cmdutil.FlagErrorf("give the table once, as an argument or with --table")
				}
				opts.Table = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return showRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name (or give it as the argument)")
	return cmd
}

func showRun(ctx context.Context, opts *ShowOptions) error {
	f := opts.F
	log, err := f.WAL(ctx)
	if err != nil {
		return err
	}
	names := []string{opts.Table}
	if opts.Table == "" {
		cctx, cancel := f.CallContext(ctx)
		infos, err := log.Tables(cctx)
		cancel()
		if err != nil {
			return err
		}
		names = names[:0]
		for _, i := range infos {
			names = append(names, i.Name)
		}
	}
	rows := []Row{}
	for _, n := range names {
		cctx, cancel := f.CallContext(ctx)
		e, err := log.Epoch(cctx, n)
		cancel()
		if err != nil {
			return err
		}
		rows = append(rows, Row{Table: n, WALEpoch: e})
	}
	return f.Print(rows, func() *render.Table {
		t := render.NewTable("table", "wal epoch")
		for _, r := range rows {
			t.Add(r.Table, fmt.Sprint(r.WALEpoch))
		}
		return t
	})
}
