package catchup

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/publish"
)

// RunOptions of `walctl catchup run`: the executor's settings and the lazy
// dependencies it needs.
type RunOptions struct {
	executor.Config
	BatchBytes       int64
	BatchGenerations int
	MergeBufferBytes int64
	CacheBytes       int64
	// Memory is the execution's budget and cache (runRun builds it from
	// MergeBufferBytes and CacheBytes before the publisher).
	Memory executor.Memory
	// OperatorMemoryLimit: GOMEMLIMIT is set, keep it.
	OperatorMemoryLimit bool

	// Admission opens the catch-up records (the executor's admission).
	Admission func(context.Context) (executor.Admission, error)
	// WAL opens the WAL the executor reads sealed generations from.
	WAL func(context.Context) (executor.Sealed, error)
	// Publisher builds the execution's publisher around guard.
	Publisher func(ctx context.Context, opts *RunOptions, guard func(context.Context, string) error, execution func() string) (executor.Acquirer, error)
	Progress  func() *progress.Reporter
	Print     func(any, func() *render.Table) error
}

const runExitHelp = `
EXIT STATUS
  0    caught up (every shard published up to what was sealed at start), or the
       soft slice ended; the report's outcome says which
  4    fenced: the claim was lost, a newer publisher epoch exists, or another
       holder (a worker) still has the claim
  11   admission closed (the master cancelled the Job or found it stalled); nothing
       more was committed
  12   wrong execution: the table is reserved for another Job, or a newer execution
       of this Job began; nothing more was committed
  130  interrupted (SIGTERM, e.g. the runner terminating the Job; outcome
       "interrupted")
  1, 2, 3, 5, 6 as for every walctl command (failure, usage, not found,
       unavailable, corrupt)`

// NewCmdRun returns `walctl catchup run`.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := newRunOptions(f)
	cmd := &cobra.Command{
		Use:   "run --table T --job ID",
		Short: "Dedicated catch-up executor of one table (what a catch-up Job runs)",
		Long: `Catch up one table's WAL backlog under a catch-up Job reserved by the master.

The executor claims the table with exactly the Job's identity (a claim by any
other Job is refused), advances the publisher epoch and fences the table, adopts
any pinned plan, and merges sealed WAL generations serially across the table's
shards, one batch (catchup.batch_bytes / catchup.batch_generations) at a time,
within one memory budget of merge buffer + cache (catchup.merge_buffer_bytes +
catchup.cache_bytes): merges hold their WAL entries and encoder workspaces
against it, and the cache of decoded WAL entries (reused when a batch's range is
read again, e.g. a re-prepared attempt) holds at most cache_bytes of it and
never makes a merge wait. The Go runtime's soft memory limit is set to that
budget plus 48 MiB unless GOMEMLIMIT is set. Before every commit it checks, in an
etcd transaction, that the Job's admission is still open and this execution is
the current one; after every batch it wrote and every commit it made it records
progress. Live producers keep appending meanwhile: the executor stops once every
shard is published up to what was sealed when it started, or when the soft slice
has passed (a batch already prepared still commits past it).

The master starts it with --table, --job and the policy's executor settings as
flags (or the WALCTL_CATCHUP_* variables); operators rarely run it by hand.

JSON (--output json), printed whatever the outcome: {"table", "job_id",
"exec_id", "epoch", "outcome", "target" (per shard, the last position sealed at
start), "watermarks", "batches": [{"plan", "adopted", "reused", "outcome",
"rows", "bytes", "version", "watermarks"}], "progress_batches",
"progress_commits", "rows", "bytes", "cache": {"max_bytes", "bytes",
"peak_bytes", "entries", "hits", "misses", "evictions", "skipped", "hit_rate"}
(absent with catchup.cache_bytes 0), "error"}. outcome is one of caught_up,
slice_ended, admission_closed, wrong_execution, fenced, interrupted, failed.
` + runExitHelp,
		Example: `  walctl catchup run --table orders --job walctl-catchup-orders-1a2b3c4d-1
  WALCTL_CATCHUP_TABLE=orders WALCTL_CATCHUP_JOB=walctl-catchup-orders-1a2b3c4d-1 walctl catchup run`,
		Args: cmdutil.ExactArgs(0, "catchup run takes no arguments (use --table and --job)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := f.Config
			opts.Table, opts.JobID, opts.Logger = c.String(KeyTable), c.String(KeyJob), f.Logger
			opts.SoftSlice = c.Duration(KeySoftSlice)
			opts.BatchBytes, opts.BatchGenerations = c.Int64(KeyBatchBytes), c.Int(KeyBatchGenerations)
			opts.MergeBufferBytes, opts.CacheBytes = c.Int64(KeyMergeBufferBytes), c.Int64(KeyCacheBytes)
			_, opts.OperatorMemoryLimit = os.LookupEnv("GOMEMLIMIT")
			switch {
			case opts.Table == "":
				return cmdutil.FlagErrorf("--table is required")
			case opts.JobID == "":
				return cmdutil.FlagErrorf("--job is required")
			case opts.SoftSlice <= 0 || opts.BatchBytes <= 0 || opts.BatchGenerations <= 0 || opts.MergeBufferBytes <= 0:
				return cmdutil.FlagErrorf("--soft-slice, --batch-bytes, --batch-generations and --merge-buffer-bytes must be positive")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddSettingFlags(cmd.Flags(), KeyTable, KeyJob, KeySoftSlice, KeyBatchBytes, KeyBatchGenerations,
		KeyMergeBufferBytes, KeyCacheBytes, cmdutil.KeyPipeline)
	return cmd
}

func runRun(ctx context.Context, opts *RunOptions) error {
	adm, err := opts.Admission(ctx)
	if err != nil {
		return err
	}
	src, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	opts.Memory = executor.NewMemory(opts.MergeBufferBytes, opts.CacheBytes)
	defer opts.Memory.Cache.Close()
	limit := opts.Memory.LimitProcess(opts.OperatorMemoryLimit)
	opts.Logger.Debug("catch-up memory", "merge_buffer_bytes", opts.MergeBufferBytes, "cache_bytes", opts.CacheBytes, "soft_limit", limit)
	prog := opts.Progress()
	cfg := opts.Config
	cfg.Cache = opts.Memory.Cache
	var rows uint64
	var bytes int64
	cfg.OnBatch = func(b executor.Batch) {
		if b.Outcome == publish.OutcomePublished {
			rows, bytes = rows+b.Rows, bytes+b.Bytes
		}
		prog.Update(progress.Status{Label: "catching up " + cfg.Table, Done: bytes, Bytes: true,
			Extra: fmt.Sprintf("%s rows, version %d", humanize.Comma(int64(rows)), b.Version)})
	}
	rep, err := executor.Execute(ctx, cfg, adm, src, func(guard func(context.Context, string) error, execution func() string) (executor.Acquirer, error) {
		return opts.Publisher(ctx, opts, guard, execution)
	})
	if rep == nil {
		return err
	}
	prog.Done(fmt.Sprintf("catch-up of %s: %s after %d batch(es): %s rows from %s of WAL, watermarks %s",
		cfg.Table, rep.Outcome, len(rep.Batches), humanize.Comma(int64(rep.Rows)), humanize.IBytes(uint64(rep.Bytes)),
		fmtWatermarks(rep.Watermarks)))
	if perr := opts.Print(rep, func() *render.Table {
		t := render.NewTable("table", "job", "exec", "outcome", "batches", "commits", "rows", "bytes", "watermarks", "target")
		t.Add(rep.Table, rep.JobID, fmt.Sprint(rep.ExecID), string(rep.Outcome), fmt.Sprint(rep.ProgressBatches),
			fmt.Sprint(rep.ProgressCommits), fmt.Sprint(rep.Rows), humanize.IBytes(uint64(rep.Bytes)),
			fmtWatermarks(rep.Watermarks), fmtWatermarks(rep.Target))
		return t
	}); perr != nil && err == nil {
		return perr
	}
	return exitFor(rep.Outcome, err)
}

// exitFor maps an execution outcome onto the documented exit codes.
func exitFor(o executor.Outcome, err error) error {
	switch o {
	case executor.OutcomeAdmissionClosed:
		return &cmdutil.ExitError{Code: cmdutil.ExitAdmissionClosed, Err: err}
	case executor.OutcomeWrongExecution:
		return &cmdutil.ExitError{Code: cmdutil.ExitWrongExecution, Err: err}
	}
	return err // nil for caught_up and slice_ended; by category otherwise
}

func fmtWatermarks(w publish.Watermarks) string {
	if len(w) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(w))
	for _, s := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, fmt.Sprintf("%d:%d", s, w[s]))
	}
	return strings.Join(parts, " ")
}
