package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/cpuload"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/pubbench"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// PublishOptions of `walctl bench publish`.
type PublishOptions struct {
	ErrOut    io.Writer
	DataDir   string
	Print     func(any, func() *render.Table) error
	Publisher func(context.Context, coord.Owner, ...coord.AcquireOption) (*publish.Publisher, error)
	Owner     func(kind string) coord.Owner
	Streamed  bool // the child's preparation mode, from its configuration
	// Exe finds the walctl executable the measured child runs.
	Exe func() (string, error)
	// S3 sets up a run on an S3 lance root (nil, nil on a local one).
	S3 func(ctx context.Context, run string) (*s3Bench, error)

	Dir    string
	Size   int64
	Budget int64
	Modes  []string
	DDMiB  int
	Keep   bool
	// CPUProfile, when set, makes each mode's child write a CPU profile of
	// its publication (claim to idle) to CPUProfile.<mode>.
	CPUProfile string
	Child      bool // hidden: this process is the measured child
}

// NewCmdPublish returns `bench publish`.
func NewCmdPublish(f *cmdutil.Factory, runF func(context.Context, *PublishOptions) error) *cobra.Command {
	opts := &PublishOptions{ErrOut: f.IOStreams.ErrOut, Print: f.Print, Publisher: f.Publisher, Owner: f.Owner, Exe: self, Size: 1 << 30, Budget: 256 << 20,
		S3: func(ctx context.Context, run string) (*s3Bench, error) { return newS3Bench(ctx, f, run) }}
	cmd := &cobra.Command{
		Use:   "publish [--size 1GiB] [--budget 256MiB] [--modes buffered,streamed]",
		Short: "Publication throughput and peak memory, buffered and streamed, beside the disk's dd fdatasync bandwidth",
		Long: `Measure publication: for each mode, build a backlog of --size ACKed, sealed,
unpublished WAL entries in a scratch data directory under --dir, then publish
it in a child walctl process (its own embedded etcd and in-process
WAL) with the memory budget --budget and the mode's preparation (buffered, or
streamed: worker.publication.pipeline_preparation). Print the publication's
MiB/s (WAL bytes published over the time from taking the claim to the idle
round), the child's peak resident set (VmHWM, from wait4's rusage), and the ratio
to the disk's own bandwidth: dd if=/dev/zero bs=1M conv=fdatasync runs once
on the quiet disk, then after each backlog is built until the disk has settled
(at least 3/4 of its best so far, at most 8 runs: a device still absorbing
gigabytes just written is slow) and right after each publication, and every
mode's ratio is to the highest of them: the disk's best in this run (shared
disks drift). On a local root, dd then runs once more over the publication's
own size, its scratch data removed first ("same-size dd"): a short dd can
measure a burst the page cache absorbs that gigabytes do not get (on a VM
whose host takes back free memory, page cache grown into new memory is
written at the rate the host backs new pages). Every measurement starts
after sync(2). Each mode also reports how many of the machine's CPUs were
busy on average during its publication (/proc/stat): near all of them, the
publication was bound by CPU, not by the disk. Figures are recorded, never
asserted.
Scratch data is removed unless --keep. With --lance-root s3://bucket/prefix
the tables go to the bucket under walctl-bench/<run>/ (left there) and each
mode's data files are then put again, one PutObject each, to the same store:
"ratio to raw put" is that upload's time over the publication's.
--cpuprofile FILE has each mode's child write a CPU profile of its
publication to FILE.<mode> (read it with go tool pprof).`,
		Example: "  walctl bench publish\n  walctl bench publish --size 4GiB --budget 256MiB --output json\n  walctl bench publish --size 8MiB --modes streamed --dd-mib 16\n  walctl bench publish --lance-root s3://lake/walctl --size 256MiB --output json\n  walctl bench publish --lance-root s3://lake/walctl --size 256MiB --cpuprofile /tmp/publish.pprof",
		Args:    cmdutil.ExactArgs(0, "bench publish takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.DataDir, opts.Streamed = f.Global().DataDir, f.Config.Bool(cmdutil.KeyPipeline)
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
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write each mode's CPU profile of the publication (in the child) to FILE.<mode>")
	cmd.Flags().BoolVar(&opts.Child, "child", false, "run as the measured child (internal)")
	_ = cmd.Flags().MarkHidden("child")
	return cmd
}

func publishRun(ctx context.Context, opts *PublishOptions) error {
	root := opts.Dir
	if root == "" {
		root = filepath.Join(opts.DataDir, "bench")
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
	exe, err := opts.Exe()
	if err != nil {
		return err
	}
	var s3b *s3Bench
	if opts.S3 != nil {
		if s3b, err = opts.S3(ctx, filepath.Base(root)); err != nil {
			return err
		}
	}
	cfg := pubbench.Config{Root: root, Size: opts.Size, Budget: opts.Budget, Modes: opts.Modes, DDMiB: opts.DDMiB,
		Keep: opts.Keep, Exe: exe, Args: childArgs(opts),
		ChildEnv: func(mode, dir string) []string { return childEnv(opts, s3b, mode, dir) },
		Log:      opts.ErrOut}
	if s3b != nil {
		cfg.Store = s3b.store
		fmt.Fprintf(opts.ErrOut, "tables under %s (left there for inspection)\n", s3b.root)
	}
	res, err := pubbench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "dd conv=fdatasync: %s MiB/s (before and after each mode)\n", ddList(res.DDs))
	return opts.Print(res, func() *render.Table { return publishTable(res, s3b != nil) })
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
// print the bytes, rows and seconds as JSON. The clock runs from taking the
// claim to the idle round: start-up (etcd, WAL recovery) is not publication.
func childRun(ctx context.Context, opts *PublishOptions) error {
	pub, err := opts.Publisher(ctx, opts.Owner(coord.OwnerCLI))
	if err != nil {
		return err
	}
	var r pubbench.ModeResult
	stop, err := startCPUProfile(opts)
	if err != nil {
		return err
	}
	cpu, start := cpuload.Now(), time.Now()
	_, _, err = pub.All(ctx, pubbench.BenchTable, func(res *publish.Result) {
		r.Rounds++
		r.Bytes += res.Bytes
		r.Rows += int64(res.Rows)
		r.Files += len(res.Files)
	})
	r.Seconds = time.Since(start).Seconds()
	r.Load = cpu.Busy(cpuload.Now())
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if r.Seconds > 0 {
		r.MiBps = float64(r.Bytes) / (1 << 20) / r.Seconds
	}
	fmt.Fprintf(opts.ErrOut, "published %s in %.2fs (%.1f MiB/s, streamed=%v)\n",
		humanize.IBytes(uint64(r.Bytes)), r.Seconds, r.MiBps, opts.Streamed)
	return opts.Print(r, nil)
}

// childArgs are the measured child's arguments.
func childArgs(opts *PublishOptions) []string {
	args := []string{"bench", "publish", "--child", "--output", "json", "--log-level", "warn"}
	if opts.CPUProfile != "" {
		args = append(args, "--cpuprofile", opts.CPUProfile)
	}
	return args
}

// startCPUProfile starts the child's CPU profile into
// CPUProfile.<mode> (nothing without --cpuprofile); stop writes it out.
func startCPUProfile(opts *PublishOptions) (stop func() error, err error) {
	if opts.CPUProfile == "" {
		return func() error { return nil }, nil
	}
	mode := "buffered"
	if opts.Streamed {
		mode = "streamed"
	}
	return cmdutil.CPUProfile(opts.CPUProfile + "." + mode)
}

// ddList formats dd bandwidths as "1150.2, 1120.7, 1098.0".
func ddList(dds []walbench.DDResult) string {
	var parts []string
	for _, d := range dds {
		parts = append(parts, fmt.Sprintf("%.1f", d.MiBps))
	}
	return strings.Join(parts, ", ")
}
