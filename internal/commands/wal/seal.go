package wal

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corewal "github.com/walctl/walctl/internal/core/wal"
)

// SealOptions of `walctl wal seal`.
type SealOptions struct {
	deps
	Table string
	Shard int // -1: every shard
}

// SealedShard is one row of `wal seal`.
type SealedShard struct {
	Shard      int                 `json:"shard"`
	Generation *corewal.Generation `json:"generation"` // null when the shard had nothing open
}

// NewCmdSeal returns `wal seal`.
func NewCmdSeal(f *cmdutil.Factory, runF func(context.Context, *SealOptions) error) *cobra.Command {
	opts := &SealOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:     "seal --table T [--shard S]",
		Short:   "Seal open generations now so they become publishable",
		Example: "  walctl wal seal --table orders            # every shard\n  walctl wal seal --table orders --shard 2",
		Args:    cmdutil.ExactArgs(0, "wal seal takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Table == "" {
				return cmdutil.FlagErrorf("--table is required")
			}
			if !cmd.Flags().Changed("shard") {
				opts.Shard = -1
			} else if opts.Shard < 0 {
				return cmdutil.FlagErrorf("--shard must not be negative, got %d", opts.Shard)
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return sealRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmd.Flags().IntVar(&opts.Shard, "shard", 0, "shard (default: every shard)")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	return cmd
}

func sealRun(ctx context.Context, opts *SealOptions) error {
	log, info, err := tableInfo(ctx, opts.deps, opts.Table)
	if err != nil {
		return err
	}
	shards := []int{opts.Shard}
	if opts.Shard < 0 {
		shards = shards[:0]
		for i := 0; i < info.Shards; i++ {
			shards = append(shards, i)
		}
	}
	res := []SealedShard{}
	for _, s := range shards {
		cctx, cancel := opts.call(ctx)
		g, err := log.Seal(cctx, opts.Table, s)
		cancel()
		if err != nil {
			return err
		}
		row := SealedShard{Shard: s}
		if g.Entries > 0 {
			row.Generation = &g
		}
		res = append(res, row)
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("shard", "sealed", "first", "last", "entries", "bytes")
		for _, r := range res {
			if r.Generation == nil {
				t.Add(fmt.Sprint(r.Shard), "nothing open", "-", "-", "0", "0")
				continue
			}
			g := r.Generation
			t.Add(fmt.Sprint(r.Shard), fmt.Sprint(g.ID), fmt.Sprint(g.First), fmt.Sprint(g.Last), fmt.Sprint(g.Entries), fmt.Sprint(g.Bytes))
		}
		return t
	})
}
