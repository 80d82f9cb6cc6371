package walcmd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/synth"
)

// LoadOptions of `walctl wal load`.
type LoadOptions struct {
	F         *cmdutil.Factory
	Table     string
	Rate      float64 // MiB/s; 0 = as fast as the WAL ACKs
	BatchRows int
	Duration  time.Duration
	Bytes     int64 // stop after this many bytes; 0 = no limit
	Producers int
	Seed      uint64
	FirstID   int64
}

// LoadResult is the JSON shape of `wal load`.
type LoadResult struct {
	Table        string  `json:"table"`
	Entries      int64   `json:"entries"`
	Rows         int64   `json:"rows"`
	Bytes        int64   `json:"bytes"`
	Seconds      float64 `json:"seconds"`
	MiBPerSecond float64 `json:"mib_per_second"`
	// FirstID and NextID bound the ids handed out: [FirstID, NextID). An id
	// whose append failed or was interrupted is in the range but not ACKed.
	FirstID int64 `json:"first_id"`
	NextID  int64 `json:"next_id"`
}

// NewCmdLoad returns `wal load`.
func NewCmdLoad(f *cmdutil.Factory, runF func(context.Context, *LoadOptions) error) *cobra.Command {
	opts := &LoadOptions{F: f}
	cmd := &cobra.Command{
		Use:   "load --table T [--rate MiB/s] [--batch-rows N] [--duration D | --bytes N]",
		Short: "Produce synthetic records into a table (demos, benchmarks)",
		Long: `Append synthetic record batches of the table's schema, spread over its shards
by --producers concurrent producers, at up to --rate MiB/s, until --duration or
--bytes is reached or the command is interrupted. An int64 field named "id"
receives a unique increasing sequence, so every record can be found again.
Progress is shown on a terminal; the summary is printed when done.`,
		Example: `  walctl wal load --table orders --rate 20 --duration 30s
  walctl wal load --table orders --bytes 64MiB --producers 4 --output json`,
		Args: cmdutil.ExactArgs(0, "wal load takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Table == "" {
				return cmdutil.FlagErrorf("--table is required")
			}
			if opts.BatchRows < 1 || opts.Producers < 1 || opts.Rate < 0 {
				return cmdutil.FlagErrorf("--batch-rows and --producers must be at least 1, --rate not negative")
			}
			if opts.Duration <= 0 && opts.Bytes <= 0 {
				return cmdutil.FlagErrorf("give --duration or --bytes")
			}
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
	cmd.Flags().Int64Var(&opts.FirstID, "first-id", 1, `first value of the "id" field (give each run its own range)`)
	return cmd
}

func loadRun(ctx context.Context, opts *LoadOptions) error {
	f := opts.F
	log, info, err := f.TableInfo(ctx, opts.Table)
	if err != nil {
		return err
	}
	if opts.Duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, opts.Duration)
		defer stop()
	}
	var limiter *rate.Limiter
	if opts.Rate > 0 {
		bps := opts.Rate * (1 << 20)
		limiter = rate.NewLimiter(rate.Limit(bps), int(bps)+64<<20)
	}

	var entries, rows, bytes atomic.Int64
	prog := f.Progress()
	start := f.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				prog.Update(progress.Status{Label: "loading " + opts.Table, Done: bytes.Load(), Total: opts.Bytes, Bytes: true,
					Extra: fmt.Sprintf("%s records", humanize.Comma(rows.Load()))})
			}
		}
	}()

	// Producers draw ids from one counter, so the ids of a run are dense
	// and unique: FirstID … LastID.
	var nextID atomic.Int64
	nextID.Store(opts.FirstID)
	var wg sync.WaitGroup
	errc := make(chan error, opts.Producers)
	for p := 0; p < opts.Producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			gen, err := synth.New(info.Schema, opts.Seed+uint64(p))
			if err != nil {
				errc <- err
				return
			}
			for i := 0; ; i++ {
				if ctx.Err() != nil || (opts.Bytes > 0 && bytes.Load() >= opts.Bytes) {
					return
				}
				gen.NextID = nextID.Add(int64(opts.BatchRows)) - int64(opts.BatchRows)
				b := gen.Batch(opts.BatchRows)
				size := int64(0)
				for _, c := range b.Columns() {
					for _, buf := range c.Data().Buffers() {
						if buf != nil {
							size += int64(buf.Len())
						}
					}
				}
				if limiter != nil {
					if err := limiter.WaitN(ctx, int(size)); err != nil {
						b.Release()
						return
					}
				}
				cctx, cancel := f.CallContext(ctx)
				_, err := log.Append(cctx, opts.Table, (p+i*opts.Producers)%info.Shards, b)
				cancel()
				b.Release()
				if err != nil {
					if ctx.Err() == nil {
						errc <- err
					}
					return
				}
				entries.Add(1)
				rows.Add(int64(opts.BatchRows))
				bytes.Add(size)
			}
		}(p)
	}
	wg.Wait()
	close(done)
	close(errc)
	elapsed := f.Now().Sub(start).Seconds()
	res := LoadResult{Table: opts.Table, Entries: entries.Load(), Rows: rows.Load(), Bytes: bytes.Load(), Seconds: elapsed,
		FirstID: opts.FirstID, NextID: nextID.Load()}
	if elapsed > 0 {
		res.MiBPerSecond = float64(res.Bytes) / (1 << 20) / elapsed
	}
	prog.Done(fmt.Sprintf("loaded %s records (%s) into %s in %.1fs, %.1f MiB/s",
		humanize.Comma(res.Rows), humanize.IBytes(uint64(res.Bytes)), opts.Table, elapsed, res.MiBPerSecond))
	if err := errors.Join(collect(errc)...); err != nil {
		return err
	}
	if interrupted := ctx.Err(); interrupted != nil && !errors.Is(interrupted, context.DeadlineExceeded) {
		return interrupted
	}
	return f.Print(res, func() *render.Table {
		t := render.NewTable("table", "entries", "rows", "bytes", "seconds", "MiB/s")
		t.Add(res.Table, fmt.Sprint(res.Entries), fmt.Sprint(res.Rows), fmt.Sprint(res.Bytes), fmt.Sprintf("%.1f", res.Seconds), fmt.Sprintf("%.1f", res.MiBPerSecond))
		return t
	})
}

func collect(c <-chan error) []error {
	var out []error
	for e := range c {
		out = append(out, e)
	}
	return out
}
