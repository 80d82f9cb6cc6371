package wal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/producer"
)

// LoadOptions of `walctl wal load`.
type LoadOptions struct {
	deps
	Table     string
	Rate      float64 // MiB/s; 0 = as fast as the WAL ACKs
	BatchRows int
	Duration  time.Duration
	Bytes     int64 // stop after this many bytes; 0 = no limit
	Producers int
	Seed      uint64
	FirstID   int64
	IDSpan    int64
	Retries   int
}

// LoadResult is the JSON shape of `wal load`, printed on failure too.
type LoadResult struct {
	Table        string  `json:"table"`
	Entries      int64   `json:"entries"`
	Rows         int64   `json:"rows"`
	Bytes        int64   `json:"bytes"`
	Seconds      float64 `json:"seconds"`
	MiBPerSecond float64 `json:"mib_per_second"`
	// FirstID and NextID bound the ids handed out: [FirstID, NextID).
	// Producers lists, per producer, its own id range and the ids that
	// were ACKed and those whose append's outcome is unknown.
	FirstID   int64                     `json:"first_id"`
	NextID    int64                     `json:"next_id"`
	OK        bool                      `json:"ok"`
	Producers []producer.ProducerResult `json:"producers"`
}

// NewCmdLoad returns `wal load`.
func NewCmdLoad(f *cmdutil.Factory, runF func(context.Context, *LoadOptions) error) *cobra.Command {
	opts := &LoadOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "load --table T [--rate MiB/s] [--batch-rows N] [--duration D | --bytes N]",
		Short: "Produce synthetic records into a table (demos, benchmarks, fault tests)",
		Long: `Append synthetic record batches of the table's schema, spread over its shards
by --producers concurrent producers, at up to --rate MiB/s, until --duration or
--bytes is reached or the command is interrupted. An int64 field named "id"
receives unique ids: producer p uses the range starting at --first-id +
p × --id-span, so the ids of two producers never interleave.

An append that fails because the WAL is unavailable may or may not have been
applied: its ids are reported as unknown and never sent again (a retry cannot
duplicate a record), and the producer goes on with fresh ids after a backoff;
it stops after --retries consecutive failures. Any other failure stops it.

The summary (also printed when producers failed, before the error) lists per
producer the ACKed id ranges and the unknown ones, so a script can check
conservation: every ACKed id exactly once in the table, an unknown one at most
once. Progress is shown on a terminal.`,
		Example: `  walctl wal load --table orders --rate 20 --duration 30s
  walctl wal load --table orders --bytes 64MiB --producers 4 --output json | jq '.producers[].acked_ids'`,
		Args: cmdutil.ExactArgs(0, "wal load takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Table == "" {
				return cmdutil.FlagErrorf("--table is required")
			}
			if opts.BatchRows < 1 || opts.Producers < 1 || opts.Rate < 0 || opts.Retries < 0 || opts.IDSpan < int64(opts.BatchRows) {
				return cmdutil.FlagErrorf("--batch-rows and --producers must be at least 1, --rate and --retries not negative, --id-span at least --batch-rows")
			}
			if opts.Duration <= 0 && opts.Bytes <= 0 {
				return cmdutil.FlagErrorf("give --duration or --bytes")
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return loadRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmd.Flags().Float64Var(&opts.Rate, "rate", 0, "target MiB/s over all producers (0: as fast as possible)")
	cmd.Flags().IntVar(&opts.BatchRows, "batch-rows", 1024, "rows per entry")
	cmd.Flags().DurationVar(&opts.Duration, "duration", 0, "stop after this long")
	cmd.Flags().Var(&cmdutil.ByteSize{V: &opts.Bytes}, "bytes", "stop after this many bytes (e.g. 64MiB)")
	cmd.Flags().IntVar(&opts.Producers, "producers", 1, "concurrent producers")
	cmd.Flags().Uint64Var(&opts.Seed, "seed", 1, "random seed of the generated values")
	cmd.Flags().Int64Var(&opts.FirstID, "first-id", 1, `first value of the "id" field (give each run its own range: the last run's next_id)`)
	cmd.Flags().Int64Var(&opts.IDSpan, "id-span", producer.DefaultIDSpan, "ids reserved for each producer")
	cmd.Flags().IntVar(&opts.Retries, "retries", 3, "consecutive failed appends a producer survives (backoff 100ms, doubling)")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	return cmd
}

func loadRun(ctx context.Context, opts *LoadOptions) error {
	log, info, err := tableInfo(ctx, opts.deps, opts.Table)
	if err != nil {
		return err
	}
	lctx := ctx
	if opts.Duration > 0 {
		var stop context.CancelFunc
		lctx, stop = context.WithTimeout(ctx, opts.Duration)
		defer stop()
	}
	prog := opts.Progress()
	start := opts.Now()
	prods, loadErr := producer.Load(lctx, log, producer.LoadConfig{
		Table: opts.Table, Info: info, Producers: opts.Producers, BatchRows: opts.BatchRows,
		BytesPerSecond: opts.Rate * (1 << 20), MaxBytes: opts.Bytes, Seed: opts.Seed,
		FirstID: opts.FirstID, IDSpan: opts.IDSpan, CallTimeout: opts.Timeout, Retries: opts.Retries,
		Progress: func(s producer.LoadStatus) {
			prog.Update(progress.Status{Label: "loading " + opts.Table, Done: s.Bytes, Total: opts.Bytes, Bytes: true,
				Extra: fmt.Sprintf("%s records", humanize.Comma(s.Rows))})
		},
	})
	res := LoadResult{Table: opts.Table, Seconds: opts.Now().Sub(start).Seconds(), FirstID: opts.FirstID, NextID: opts.FirstID,
		OK: loadErr == nil, Producers: prods}
	for _, p := range prods {
		res.Entries, res.Rows, res.Bytes, res.NextID = res.Entries+p.Entries, res.Rows+p.Rows, res.Bytes+p.Bytes, max(res.NextID, p.NextID)
	}
	if res.Seconds > 0 {
		res.MiBPerSecond = float64(res.Bytes) / (1 << 20) / res.Seconds
	}
	prog.Done(fmt.Sprintf("loaded %s records (%s) into %s in %.1fs, %.1f MiB/s",
		humanize.Comma(res.Rows), humanize.IBytes(uint64(res.Bytes)), opts.Table, res.Seconds, res.MiBPerSecond))
	if interrupted := ctx.Err(); interrupted != nil {
		loadErr = errors.Join(interrupted, loadErr)
		res.OK = false
	}
	if err := opts.Print(res, func() *render.Table { return loadTable(res) }); err != nil {
		return errors.Join(loadErr, err)
	}
	return loadErr
}

func loadTable(res LoadResult) *render.Table {
	t := render.NewTable("table", "producer", "entries", "rows", "bytes", "acked ids", "unknown ids", "error")
	for _, p := range res.Producers {
		t.Add(res.Table, fmt.Sprint(p.Producer), fmt.Sprint(p.Entries), fmt.Sprint(p.Rows), fmt.Sprint(p.Bytes),
			ranges(p.Acked), ranges(p.Unknown), p.Error)
	}
	t.Add(res.Table, "all", fmt.Sprint(res.Entries), fmt.Sprint(res.Rows), fmt.Sprint(res.Bytes),
		fmt.Sprintf("%.1fs", res.Seconds), fmt.Sprintf("%.1f MiB/s", res.MiBPerSecond), "")
	return t
}

func ranges(rs []producer.IDRange) string {
	if len(rs) == 0 {
		return "-"
	}
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%d-%d", r.First, r.Last)
	}
	return s
}
