package wal

import (
	"context"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/publish"
	corewal "github.com/walctl/walctl/internal/core/wal"
)

// StatsOptions of `walctl wal stats`.
type StatsOptions struct {
	deps
	// Watermarks returns a table's published watermarks (from its latest
	// Lance version).
	Watermarks func(table string) (publish.Watermarks, error)
	Table      string
}

// NewCmdStats returns `wal stats`.
func NewCmdStats(f *cmdutil.Factory, runF func(context.Context, *StatsOptions) error) *cobra.Command {
	opts := &StatsOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "stats [--table T]",
		Short: "Per table and shard: generations, entries, bytes, positions, trimmed-through",
		Long: `Per table and shard: open and sealed generations, entries, bytes, the last
durable position, the trimmed-through position and the age of the oldest
sealed generation not yet published. The published watermark is read from the
table's latest Lance version (no claim), so watermark_behind_trim in the JSON
is set only when entries the table has not published were trimmed.`,
		Example: "  walctl wal stats\n  walctl wal stats --table orders --output json",
		Args:    cmdutil.ExactArgs(0, "wal stats takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.fill(f)
			root, err := f.LanceStore(cmd.Context())
			if err != nil {
				return err
			}
			opts.Watermarks = func(table string) (publish.Watermarks, error) { return publish.LatestWatermarksOn(root, table) }
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
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	names := []string{opts.Table}
	if opts.Table == "" {
		if names, err = tableNames(ctx, opts.deps, log); err != nil {
			return err
		}
	}
	res := []corewal.TableStats{}
	for _, n := range names {
		wm, err := opts.Watermarks(n)
		if err != nil {
			return err
		}
		cctx, cancel := opts.call(ctx)
		st, err := log.Stats(cctx, n, wm)
		cancel()
		if err != nil {
			return err
		}
		res = append(res, st)
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("table", "shard", "epoch", "open", "sealed", "entries", "bytes", "last", "watermark", "trimmed", "oldest pending")
		for _, st := range res {
			for _, s := range st.Shards {
				age := "-"
				if s.OldestPendingAge > 0 {
					age = s.OldestPendingAge.Round(time.Second).String()
				}
				wm := fmt.Sprint(s.Watermark)
				if s.WatermarkBehindTrim {
					wm += " (behind trim!)"
				}
				t.Add(st.Table, fmt.Sprint(s.Shard), fmt.Sprint(st.Epoch), fmt.Sprint(s.OpenGenerations), fmt.Sprint(s.SealedGenerations),
					fmt.Sprint(s.Entries), humanize.IBytes(uint64(s.Bytes)), fmt.Sprint(s.LastPosition), wm, fmt.Sprint(s.TrimmedThrough), age)
			}
		}
		return t
	})
}

func tableNames(ctx context.Context, d deps, log corewal.Log) ([]string, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	infos, err := log.Tables(cctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(infos))
	for _, i := range infos {
		names = append(names, i.Name)
	}
	return names, nil
}
