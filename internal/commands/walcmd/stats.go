package walcmd

import (
	"context"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/wal"
)

// StatsOptions of `walctl wal stats`.
type StatsOptions struct {
	F     *cmdutil.Factory
	Table string
}

// NewCmdStats returns `wal stats`.
func NewCmdStats(f *cmdutil.Factory, runF func(context.Context, *StatsOptions) error) *cobra.Command {
	opts := &StatsOptions{F: f}
	cmd := &cobra.Command{
		Use:     "stats [--table T]",
		Short:   "Per table and shard: generations, entries, bytes, positions, trimmed-through",
		Example: "  walctl wal stats\n  walctl wal stats --table orders --output json",
		Args:    cmdutil.ExactArgs(0, "wal stats takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statsRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "only this table")
	return cmd
}

func statsRun(ctx context.Context, opts *StatsOptions) error {
	f := opts.F
	log, names, err := f.TableNames(ctx, opts.Table)
	if err != nil {
		return err
	}
	res := []wal.TableStats{}
	for _, n := range names {
		cctx, cancel := f.CallContext(ctx)
		st, err := log.Stats(cctx, n, nil)
		cancel()
		if err != nil {
			return err
		}
		res = append(res, st)
	}
	return f.Print(res, func() *render.Table {
		t := render.NewTable("table", "shard", "epoch", "open", "sealed", "entries", "bytes", "last", "trimmed", "oldest sealed")
		for _, st := range res {
			for _, s := range st.Shards {
				age := "-"
				if s.OldestPendingAge > 0 {
					age = s.OldestPendingAge.Round(time.Second).String()
				}
				t.Add(st.Table, fmt.Sprint(s.Shard), fmt.Sprint(st.Epoch), fmt.Sprint(s.OpenGenerations), fmt.Sprint(s.SealedGenerations),
					fmt.Sprint(s.Entries), humanize.IBytes(uint64(s.Bytes)), fmt.Sprint(s.LastPosition), fmt.Sprint(s.TrimmedThrough), age)
			}
		}
		return t
	})
}
