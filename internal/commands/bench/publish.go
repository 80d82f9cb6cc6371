package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/pubbench"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// benchTable is the table bench publish creates in its scratch directories.
const benchTable = "bench"

// PublishOptions of `walctl bench publish`.
type PublishOptions struct {
	F      *cmdutil.Factory
	Dir    string
	Size   int64
	Budget int64
	Modes  []string
	DDMiB  int
	Keep   bool
	Child  bool // hidden: this process is the measured child
}

// ModeResult is one mode's publication.
type ModeResult struct {
	Mode    string  `json:"mode"`
	Bytes   int64   `json:"bytes"`
	Rows    int64   `json:"rows"`
	Files   int     `json:"files"`
	Rounds  int     `json:"rounds"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mib_per_s"`
	// PeakRSS is the child process's peak resident set (VmHWM), bytes.
	PeakRSS    int64   `json:"peak_rss_bytes"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// DDMiBps is the highest dd conv=fdatasync bandwidth measured in the
	// run (right before and right after each publication); RatioToDD is
	// MiBps over it.
	DDMiBps   float64 `json:"dd_mib_per_s"`
	RatioToDD float64 `json:"ratio_to_dd"`
	// WallSeconds is the child's whole life (etcd start, open, exit).
	WallSeconds float64 `json:"wall_seconds"`
}

// PublishResult is the JSON shape of `bench publish`.
type PublishResult struct {
	Dir     string             `json:"dir"`
	Size    int64              `json:"size"`
	Budget  int64              `json:"budget"`
	Backlog []pubbench.Backlog `json:"backlog"`
	// DDs are the dd measurements right before and right after each mode's
	// publication (its backlog built); DD and DDAfter the first and the
	// last, DDMiBps the mean of all.
	DDs     []walbench.DDResult `json:"dd_runs"`
	DD      walbench.DDResult   `json:"dd"`
	DDAfter walbench.DDResult   `json:"dd_after"`
	DDMiBps float64             `json:"dd_mib_per_s"`
	Runs    []ModeResult        `json:"runs"`
}

// NewCmdPublish returns `bench publish`.
func NewCmdPublish(f *cmdutil.Factory, runF func(context.Context, *PublishOptions) error) *cobra.Command {
	opts := &PublishOptions{F: f, Size: 1 << 30, Budget: 256 << 20}
	cmd := &cobra.Command{
		Use:   "publish [--size 1GiB] [--budget 256MiB] [--modes buffered,streamed]",
		Short: "Publication throughput and peak memory, buffered and streamed, beside the disk's dd fdatasync bandwidth",
		Long: `Measure publication: for each mode, build a backlog of --size ACKed, sealed,
unpublished WAL entries in a scratch data directory under --dir, then publish
it in a child walctl process (its own embedded etcd and in-process
WAL) with the memory budget --budget and the mode's preparation (buffered, or
streamed: worker.publication.pipeline_preparation). Print the publication's
MiB/s (WAL bytes published over the time from the first round to the idle
one), the child's peak resident set (VmHWM, from wait4's rusage), and the ratio
to the disk's own bandwidth: dd if=/dev/zero bs=1M conv=fdatasync runs right
before and right after each publication, its backlog in place, and every
mode's ratio is to the highest of them: the disk's best in this run (shared
disks drift, and slow down while gigabytes just written are kept). Every
measurement starts after sync(2). Figures are recorded, never asserted.
Scratch data is removed unless --keep.`,
		Example: "  walctl bench publish\n  walctl bench publish --size 4GiB --budget 256MiB --output json\n  walctl bench publish --size 8MiB --modes streamed --dd-mib 16",
		Args:    cmdutil.ExactArgs(0, "bench publish takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Child {
				return childRun(cmd.Context(), opts)
			}
			if opts.Size <= 0 || opts.Budget <= 0 || opts.DDMiB <= 0 {
				return cmdutil.FlagErrorf("--size, --budget and --dd-mib must be positive")
			}
			for _, m := range opts.Modes {
				if m != "buffered" && m != "streamed" {
					return cmdutil.FlagErrorf("--modes: %q is neither buffered nor streamed", m)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return publishRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "scratch directory on the disk to measure (default <data-dir>/bench)")
	cmd.Flags().Var(&cmdutil.ByteSize{V: &opts.Size}, "size", "backlog size per mode (e.g. 1GiB, 8MiB)")
	cmd.Flags().Var(&cmdutil.ByteSize{V: &opts.Budget}, "budget", "memory budget of the publishing process (worker.memory_budget)")
	cmd.Flags().StringSliceVar(&opts.Modes, "modes", []string{"buffered", "streamed"}, "preparation modes to measure, in order")
	cmd.Flags().IntVar(&opts.DDMiB, "dd-mib", 512, "MiB written by the dd measurement")
	cmd.Flags().BoolVar(&opts.Keep, "keep", false, "keep the scratch data directories")
	cmd.Flags().BoolVar(&opts.Child, "child", false, "run as the measured child (internal)")
	_ = cmd.Flags().MarkHidden("child")
	return cmd
}

func publishRun(ctx context.Context, opts *PublishOptions) error {
	f := opts.F
	root := opts.Dir
	if root == "" {
		root = filepath.Join(f.Global().DataDir, "bench")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	root, err := os.MkdirTemp(root, "publish-")
	if err != nil {
		return err
	}
	if !opts.Keep {
		defer os.RemoveAll(root)
	}
	exe, err := self()
	if err != nil {
		return err
	}
	errOut := f.IOStreams.ErrOut
	res := PublishResult{Dir: root, Size: opts.Size, Budget: opts.Budget, Backlog: []pubbench.Backlog{}, Runs: []ModeResult{}}
	fmt.Fprintf(errOut, "measuring the disk under %s with dd (%d MiB, conv=fdatasync) around each mode…\n", root, opts.DDMiB)
	for _, mode := range opts.Modes {
		dir := filepath.Join(root, mode)
		fmt.Fprintf(errOut, "%s: building a %s backlog…\n", mode, humanize.IBytes(uint64(opts.Size)))
		bl, err := backlog(ctx, dir, opts.Size)
		if err != nil {
			return err
		}
		res.Backlog = append(res.Backlog, bl)
		// dd right before and right after the publication, with the
		// backlog in place: the disk in the state the publication has.
		before, err := walbench.DD(ctx, root, opts.DDMiB)
		if err != nil {
			return err
		}
		fmt.Fprintf(errOut, "%s: publishing %s in a child process (budget %s)…\n", mode, humanize.IBytes(uint64(bl.Bytes)), humanize.IBytes(uint64(opts.Budget)))
		env := append(os.Environ(),
			"WALCTL_DATA_DIR="+dir, "WALCTL_EMBEDDED=true", "WALCTL_WAL=", "WALCTL_LANCE_ROOT=",
			"WALCTL_WORKER_MEMORY_BUDGET="+strconv.FormatInt(opts.Budget, 10),
			"WALCTL_WORKER_PUBLICATION_PIPELINE_PREPARATION="+strconv.FormatBool(mode == "streamed"))
		walbench.Settle()
		c, err := pubbench.RunChild(ctx, exe, []string{"bench", "publish", "--child", "--output", "json", "--log-level", "warn"}, env, errOut)
		if err != nil {
			return err
		}
		var r ModeResult
		if err := json.Unmarshal(c.Stdout, &r); err != nil {
			return fmt.Errorf("child output %q: %v", c.Stdout, err)
		}
		after, err := walbench.DD(ctx, root, opts.DDMiB)
		if err != nil {
			return err
		}
		r.Mode, r.PeakRSS, r.WallSeconds = mode, c.PeakRSS, c.Wall.Seconds()
		r.PeakRSSMiB = float64(c.PeakRSS) / (1 << 20)
		res.Runs = append(res.Runs, r)
		res.DDs = append(res.DDs, before, after)
		if !opts.Keep {
			_ = os.RemoveAll(dir)
		}
	}
	res.DD, res.DDAfter, res.DDMiBps = res.DDs[0], res.DDs[len(res.DDs)-1], walbench.MeanDD(res.DDs)
	best := 0.0
	for _, d := range res.DDs {
		best = max(best, d.MiBps)
	}
	for i := range res.Runs {
		res.Runs[i].DDMiBps = best
		if best > 0 {
			res.Runs[i].RatioToDD = res.Runs[i].MiBps / best
		}
	}
	fmt.Fprintf(errOut, "dd conv=fdatasync: %s MiB/s (before and after each mode)\n", ddList(res.DDs))
	return f.Print(res, func() *render.Table {
		t := render.NewTable("mode", "MiB", "MiB/s", "peak RSS", "budget", "dd MiB/s", "ratio to dd", "files", "rows")
		for _, r := range res.Runs {
			t.Add(r.Mode, fmt.Sprintf("%.0f", float64(r.Bytes)/(1<<20)), fmt.Sprintf("%.1f", r.MiBps), fmt.Sprintf("%.0f MiB", r.PeakRSSMiB),
				humanize.IBytes(uint64(res.Budget)), fmt.Sprintf("%.1f", r.DDMiBps), fmt.Sprintf("%.2f", r.RatioToDD), fmt.Sprint(r.Files), humanize.Comma(r.Rows))
		}
		return t
	})
}

// backlog builds the mode's backlog in dir's WAL with the engine's default
// options, then closes it for the child to open.
func backlog(ctx context.Context, dir string, size int64) (pubbench.Backlog, error) {
	log, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		return pubbench.Backlog{}, err
	}
	bl, err := pubbench.MakeBacklog(ctx, log, pubbench.BacklogOptions{Table: benchTable, Bytes: size})
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	return bl, err
}

// self is the walctl executable to re-run: os.Args[0] as invoked (a test
// harness links the binary under that name), else this executable.
func self() (string, error) {
	if strings.ContainsRune(os.Args[0], filepath.Separator) {
		return filepath.Abs(os.Args[0])
	}
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		return p, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the walctl executable: %v: %w", err, errs.ErrUnavailable)
	}
	return p, nil
}

// childRun is the measured side of `bench publish`: publish the bench
// table until idle with the configured budget and preparation mode, and
// print the bytes, rows and seconds as JSON. The clock runs from the first
// round to the idle one: start-up (etcd, WAL recovery) is not publication.
func childRun(ctx context.Context, opts *PublishOptions) (err error) {
	f := opts.F
	pub, err := f.Publisher(ctx, f.Owner(coord.OwnerCLI))
	if err != nil {
		return err
	}
	s, err := pub.Acquire(ctx, benchTable)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := f.CallContext(context.WithoutCancel(ctx))
		defer cancel()
		if rerr := s.Release(rctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	var r ModeResult
	start := time.Now()
	for {
		res, err := s.Round(ctx)
		if err != nil {
			return err
		}
		r.Rounds++
		if res.Outcome == publish.OutcomeIdle {
			break
		}
		if res.Outcome != publish.OutcomePublished {
			return fmt.Errorf("bench round %d: outcome %s: %w", r.Rounds, res.Outcome, errs.ErrConflict)
		}
		r.Bytes += res.Bytes
		r.Rows += int64(res.Rows)
		r.Files += len(res.Files)
	}
	r.Seconds = time.Since(start).Seconds()
	if r.Seconds > 0 {
		r.MiBps = float64(r.Bytes) / (1 << 20) / r.Seconds
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "published %s in %.2fs (%.1f MiB/s, streamed=%v)\n",
		humanize.IBytes(uint64(r.Bytes)), r.Seconds, r.MiBps, f.Config.Bool(cmdutil.KeyPipeline))
	return f.Print(r, nil)
}

// ddList formats dd bandwidths as "1150.2, 1120.7, 1098.0".
func ddList(dds []walbench.DDResult) string {
	var parts []string
	for _, d := range dds {
		parts = append(parts, fmt.Sprintf("%.1f", d.MiBps))
	}
	return strings.Join(parts, ", ")
}
