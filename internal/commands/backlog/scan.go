// Package backlog implements `walctl backlog scan`.
package backlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/watermarks"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/wal"
)

// ScanOptions of `walctl backlog scan`.
type ScanOptions struct {
	WAL       func(context.Context) (wal.Log, error)
	Coord     func(context.Context) (*coord.Client, error)
	Print     func(any, func() *render.Table) error
	Timeout   time.Duration
	LanceRoot string
	Store     objstore.Store
}

// NewCmdBacklog returns the `backlog` command group.
func NewCmdBacklog(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "backlog <command>", Short: "Inspect the unpublished WAL backlog"}
	cmd.AddCommand(NewCmdScan(f, nil))
	return cmd
}

// NewCmdScan returns `walctl backlog scan`.
func NewCmdScan(f *cmdutil.Factory, runF func(context.Context, *ScanOptions) error) *cobra.Command {
	opts := &ScanOptions{WAL: f.WAL, Coord: f.Coord, Print: f.Print}
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Scan every table's unpublished sealed generations, bytes and oldest age, per shard",
		Long: `Run the master's backlog scan once: for every table in the WAL, per shard, the
sealed generations holding entries above the published watermark (read from the
table's latest Lance version, without a claim), their bytes and the age of the
oldest. The statistics are stored in etcd with their observation time, exactly
as the master's periodic scan stores them, so a catch-up admission can use them.

JSON (--output json): a list of {"table", "pending_generations",
"pending_bytes", "oldest_pending_age_ns", "observed_at", "shards": [{"shard",
"watermark", "last_position", "pending_generations", "pending_bytes",
"oldest_pending_age_ns", "watermark_behind_trim"}]}.

A table whose scan fails is reported on stderr and the others are still
printed; the exit status is then that of the failure (see below). A shard
with a damaged or quarantined WAL range is marked "(damaged WAL!)", carries
"damage" in JSON, and is reported on stderr with exit status 6 after every
table was printed.`,
		Example: "  walctl backlog scan\n  walctl backlog scan --output json | jq '.[] | {table, pending_generations}'",
		Args:    cmdutil.ExactArgs(0, "backlog scan takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Timeout, opts.LanceRoot = f.Timeout(), f.Global().LanceRoot
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return scanRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func scanRun(ctx context.Context, opts *ScanOptions) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	co, err := opts.Coord(ctx)
	if err != nil {
		return err
	}
	store := catchup.NewStore(co, catchup.StoreOptions{CallTimeout: opts.Timeout})
	stats, scanErr := catchup.NewScanner(store, log, watermarks.FromStore(cmdutil.RootStore(opts.Store, opts.LanceRoot))).Scan(ctx)
	if stats == nil {
		stats = []catchup.TableStats{}
	}
	if err := opts.Print(stats, func() *render.Table {
		t := render.NewTable("table", "shard", "watermark", "last", "pending gens", "pending bytes", "oldest age")
		for _, st := range stats {
			t.Add(st.Table, "all", "-", "-", fmt.Sprint(st.PendingGenerations), humanize.IBytes(uint64(st.PendingBytes)), age(st.OldestPendingAge))
			for _, sh := range st.Shards {
				wm := fmt.Sprint(sh.Watermark)
				if sh.WatermarkBehindTrim {
					wm += " (behind trim!)"
				}
				if len(sh.Damage) > 0 {
					wm += " (damaged WAL!)"
				}
				t.Add("", fmt.Sprint(sh.Shard), wm, fmt.Sprint(sh.LastPosition), fmt.Sprint(sh.PendingGenerations),
					humanize.IBytes(uint64(sh.PendingBytes)), age(sh.OldestPendingAge))
			}
		}
		return t
	}); err != nil {
		return err
	}
	return errors.Join(scanErr, damageErr(stats))
}

// damageErr reports each damaged WAL range the scan met (exit 6), after the
// statistics of every table were printed.
func damageErr(stats []catchup.TableStats) error {
	var out []error
	for _, st := range stats {
		for _, sh := range st.Shards {
			for _, d := range sh.Damage {
				out = append(out, fmt.Errorf("%s: %w", d, wal.ErrCorruptEntry))
			}
		}
	}
	return errors.Join(out...)
}

func age(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}
