// Package bench implements `walctl bench`: measurements printed beside the
// machine's own limits, as ratios (recorded, never asserted).
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/replbench"
	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// NewCmdBench returns the `bench` command group.
func NewCmdBench(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench <command>",
		Short: "Measure WAL, Lance and publication throughput against this machine's disk",
	}
	cmd.AddCommand(NewCmdWAL(f, nil), NewCmdLance(f, nil), NewCmdPublish(f, nil), NewCmdE2E(f, nil))
	return cmd
}

// out is what the bench verbs copy from the factory.
type out struct {
	ErrOut  io.Writer
	Print   func(any, func() *render.Table) error
	DataDir string
}

// WALOptions of `walctl bench wal`.
type WALOptions struct {
	out
	Dir       string
	Producers []int
	Config    walbench.Config
	// Replicas > 0 also measures a replicated group of that many `wal
	// serve` processes of Exe.
	Replicas int
	Exe      string
	// CPUProfile, with Replicas, has each replica write a CPU profile.
	CPUProfile string
}

// NewCmdWAL returns `bench wal`.
func NewCmdWAL(f *cmdutil.Factory, runF func(context.Context, *WALOptions) error) *cobra.Command {
	opts := &WALOptions{out: out{ErrOut: f.IOStreams.ErrOut, Print: f.Print}}
	var entry, perRun, dd int
	var trim bool
	cmd := &cobra.Command{
		Use:   "wal [--dir D] [--producers 1,4,16]",
		Short: "Durable append throughput and ACK latency beside the disk's dd fdatasync bandwidth",
		Long: `Measure the WAL's durable append throughput (MiB/s) and ACK latency (p50, p99)
for each number of concurrent producers, in scratch WAL directories under --dir,
and the disk's own bandwidth with dd if=/dev/zero bs=1M conv=fdatasync before,
between and after the runs; print each run's ratio to the higher of the two
dd measured right around it (shared disks drift). Each producer appends one
untimed batch first (warm-up), and every measurement starts after sync(2), so
none pays for the one before. Scratch files are removed.

Sealed generations are trimmed as they seal, as a publication keeping up
would, and the WAL writes new generations over the trimmed ones' files, as
it does in service: that steady state is what is measured. --trim=false
measures a WAL nobody trims (every generation in new files).

With --replicas N, the same producer counts also run against a replicated
group of N 'wal serve' processes on this disk (started, grouped and stopped
by the benchmark), through the group client: ACKed MiB/s, p50/p99 ACK
latency, bytes each replica process wrote per ACKed byte (/proc/<pid>/io
write_bytes) and disk efficiency = ACKed MiB/s × N ÷ dd MiB/s. Every run
also reports how many of the machine's CPUs were busy on average while its
producers ran (/proc/stat: user, system, interrupts, steal): a run near all
of them was bound by CPU, not by the disk ("-" for a run under 50 ms,
too short for /proc/stat's clock ticks). With
--cpuprofile FILE each replica writes a CPU profile of its run to
FILE.p<producers>.r<replica> (read it with go tool pprof).

EXIT STATUS
  0 measured, 2 bad flags, 5 the disk, a replica or the group failed.`,
		Example: "  walctl bench wal\n  walctl bench wal --dir /var/lib/walctl --producers 16 --output json\n  walctl bench wal --replicas 3 --mib-per-run 256 --dd-mib 256\n  walctl bench wal --producers 1 --trim=false\n  walctl bench wal --replicas 3 --producers 16 --cpuprofile /tmp/replica.pprof",
		Args:    cmdutil.ExactArgs(0, "bench wal takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Config = walbench.Config{Dir: opts.Dir, Producers: opts.Producers, EntryBytes: entry, BytesPerRun: int64(perRun) << 20, DDMiB: dd, NoTrim: !trim}
			opts.DataDir = f.Global().DataDir
			if opts.Replicas < 0 || opts.Replicas == 2 || opts.Replicas > 7 {
				return cmdutil.FlagErrorf("--replicas must be 0 (off), 1 or 3 to 7, not %d", opts.Replicas)
			}
			if opts.CPUProfile != "" && opts.Replicas == 0 {
				return cmdutil.FlagErrorf("--cpuprofile profiles the replicas: it needs --replicas")
			}
			if opts.Replicas > 0 {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				opts.Exe = exe
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return walRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "scratch directory on the disk to measure (default <data-dir>/bench)")
	cmd.Flags().IntSliceVar(&opts.Producers, "producers", []int{1, 4, 16}, "concurrent producer counts")
	cmd.Flags().IntVar(&entry, "entry-bytes", 1<<20, "bytes per appended record batch")
	cmd.Flags().IntVar(&perRun, "mib-per-run", 512, "MiB appended per producer count")
	cmd.Flags().IntVar(&dd, "dd-mib", 512, "MiB written by each dd measurement")
	cmd.Flags().BoolVar(&trim, "trim", true, "trim sealed generations as they seal (the steady state); false: nobody trims")
	cmd.Flags().IntVar(&opts.Replicas, "replicas", 0, "also measure a replicated group of this many wal serve processes (3 or 5)")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "with --replicas: each replica writes a CPU profile of its run to FILE.p<producers>.r<replica>")
	return cmd
}

func walRun(ctx context.Context, opts *WALOptions) error {
	if opts.Config.Dir == "" {
		opts.Config.Dir = opts.DataDir + "/bench"
	}
	if err := os.MkdirAll(opts.Config.Dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "measuring the disk under %s and the WAL with %v producers…\n", opts.Config.Dir, opts.Config.Producers)
	if opts.Replicas > 0 {
		return replicatedRun(ctx, opts)
	}
	res, err := walbench.Run(ctx, opts.Config)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "dd conv=fdatasync: %s MiB/s (before, between and after the runs)\n", ddList(res.DDs))
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("producers", "MiB/s", "p50 ack", "p99 ack", "dd MiB/s", "ratio to dd", "CPUs busy")
		for _, r := range res.Runs {
			t.Add(fmt.Sprint(r.Producers), fmt.Sprintf("%.1f", r.MiBps), fmt.Sprintf("%.2f ms", r.P50Ms), fmt.Sprintf("%.2f ms", r.P99Ms), fmt.Sprintf("%.1f", r.DDMiBps), fmt.Sprintf("%.2f", r.Ratio),
				r.Load.Text())
		}
		return t
	})
}

func replicatedRun(ctx context.Context, opts *WALOptions) error {
	res, err := replbench.Measure(ctx, replbench.Config{Config: opts.Config, Exe: opts.Exe, Replicas: opts.Replicas, CPUProfile: opts.CPUProfile})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "dd conv=fdatasync: %s MiB/s (before, between and after the runs)\n", ddList(res.DDs))
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("mode", "producers", "MiB/s", "p50 ack", "p99 ack", "dd MiB/s", "write amp per replica", "disk efficiency", "CPUs busy")
		for _, r := range res.Runs {
			amp := make([]string, len(r.WriteAmp))
			for i, a := range r.WriteAmp {
				amp[i] = fmt.Sprintf("%.2f", a)
			}
			t.Add(r.Mode, fmt.Sprint(r.Producers), fmt.Sprintf("%.1f", r.MiBps), fmt.Sprintf("%.2f ms", r.P50Ms), fmt.Sprintf("%.2f ms", r.P99Ms),
				fmt.Sprintf("%.1f", r.DDMiBps), strings.Join(amp, " "), fmt.Sprintf("%.2f", r.DiskEfficiency), r.Load.Text())
		}
		return t
	})
}
