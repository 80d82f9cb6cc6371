package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/lance/lancebench"
	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// LanceOptions of `walctl bench lance`.
type LanceOptions struct {
	out
	Dir        string
	OracleDir  string
	CPUProfile string
	Config     lancebench.Config
}

// NewCmdLance returns `bench lance`.
func NewCmdLance(f *cmdutil.Factory, runF func(context.Context, *LanceOptions) error) *cobra.Command {
	opts := &LanceOptions{out: out{ErrOut: f.IOStreams.ErrOut, Print: f.Print}, Config: lancebench.DefaultConfig}
	cmd := &cobra.Command{
		Use:   "lance [--adds N] [--batches-per-add N] [--rows-per-batch N]",
		Short: "Write throughput of walctl's Lance writer (2.0 and 2.1) against the official LanceDB writer",
		Long: `Write the same Arrow batches (int64 id, microsecond timestamp, short utf8,
768-dim float32 vector, 256-byte binary) through walctl's Lance writer, in file
format 2.0 and 2.1, and through the official LanceDB table.add, on the same
disk in one run; print MiB/s, the speed ratios and the file-size ratios.
dd conv=fdatasync runs right before and right after the walctl writers
(--dd-mib, 0 to skip): each walctl writer's data-file bytes per second
(what the disk wrote, synced) is also given as a ratio to the better of
the two. --cpuprofile FILE writes a CPU profile of walctl's side. Needs
Node.js and the pinned official package (make oracle).`,
		Example: "  walctl bench lance\n  walctl bench lance --adds 16 --output json\n  walctl bench lance --cpuprofile /tmp/lance.pprof",
		Args:    cmdutil.ExactArgs(0, "bench lance takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Config.Adds < 1 || opts.Config.BatchesPerAdd < 1 || opts.Config.RowsPerBatch < 1 {
				return cmdutil.FlagErrorf("--adds, --batches-per-add and --rows-per-batch must be at least 1")
			}
			if opts.Config.DDMiB < 0 {
				return cmdutil.FlagErrorf("--dd-mib must be 0 (no dd) or more")
			}
			opts.DataDir = f.Global().DataDir
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return lanceRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "scratch directory (default <data-dir>/bench)")
	cmd.Flags().StringVar(&opts.OracleDir, "oracle", "", "directory of the official LanceDB package (default tools/lance-oracle of the source tree)")
	cmd.Flags().IntVar(&opts.Config.Adds, "adds", opts.Config.Adds, "files (walctl) and table.add calls (official)")
	cmd.Flags().IntVar(&opts.Config.BatchesPerAdd, "batches-per-add", opts.Config.BatchesPerAdd, "record batches per add")
	cmd.Flags().IntVar(&opts.Config.RowsPerBatch, "rows-per-batch", opts.Config.RowsPerBatch, "rows per record batch")
	cmd.Flags().IntVar(&opts.Config.DDMiB, "dd-mib", opts.Config.DDMiB, "MiB written by each dd conv=fdatasync run around the walctl writers (0: no dd)")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the run (walctl's writers; the official one runs in Node) to FILE")
	return cmd
}

func lanceRun(ctx context.Context, opts *LanceOptions) error {
	find := oracle.Find
	if opts.OracleDir != "" {
		find = func() (*oracle.Oracle, error) { return oracle.At(opts.OracleDir) }
	}
	o, err := find()
	if err != nil {
		return err
	}
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(opts.DataDir, "bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(dir, "lance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	fmt.Fprintf(opts.ErrOut, "writing %d × %d × %d rows with walctl (2.0, 2.1) and the official writer under %s…\n",
		opts.Config.Adds, opts.Config.BatchesPerAdd, opts.Config.RowsPerBatch, scratch)
	stop := func() error { return nil }
	if opts.CPUProfile != "" {
		if stop, err = cmdutil.CPUProfile(opts.CPUProfile); err != nil {
			return err
		}
	}
	res, err := lancebench.Run(ctx, o, scratch, opts.Config)
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("writer", "MiB/s", "seconds", "bytes on disk", "disk MiB/s", "÷ dd", "speed ratio", "size ratio")
		ratio := func(s lancebench.Side) string {
			if s.RatioToDD == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", s.RatioToDD)
		}
		row := func(name string, s lancebench.Side, speed, size float64) {
			t.Add(name, fmt.Sprintf("%.1f", s.MiBPerSec), fmt.Sprintf("%.2f", s.Seconds), fmt.Sprint(s.DataBytes),
				fmt.Sprintf("%.1f", s.DiskMiBPerSec), ratio(s), fmt.Sprintf("%.2f", speed), fmt.Sprintf("%.3f", size))
		}
		row("walctl 2.0", res.Walctl, res.SpeedRatio, res.FileSizeRatio)
		row("walctl 2.1", res.Walctl21, res.SpeedRatio21, res.FileSizeRatio21)
		row("official", res.Official, 1, 1)
		if res.DDMiBps > 0 {
			t.Add("dd conv=fdatasync", "", "", "", fmt.Sprintf("%.1f", res.DDMiBps), "1.00", "", "")
		}
		return t
	})
}
