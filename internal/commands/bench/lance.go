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
	Dir       string
	OracleDir string
	Config    lancebench.Config
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
disk in one run; print MiB/s, the speed ratios and the file-size ratios. Needs
Node.js and the pinned official package (make oracle).`,
		Example: "  walctl bench lance\n  walctl bench lance --adds 16 --output json",
		Args:    cmdutil.ExactArgs(0, "bench lance takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Config.Adds < 1 || opts.Config.BatchesPerAdd < 1 || opts.Config.RowsPerBatch < 1 {
				return cmdutil.FlagErrorf("--adds, --batches-per-add and --rows-per-batch must be at least 1")
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
	res, err := lancebench.Run(ctx, o, scratch, opts.Config)
	if err != nil {
		return err
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("writer", "MiB/s", "seconds", "bytes on disk", "speed ratio", "size ratio")
		t.Add("walctl 2.0", fmt.Sprintf("%.1f", res.Walctl.MiBPerSec), fmt.Sprintf("%.2f", res.Walctl.Seconds), fmt.Sprint(res.Walctl.DataBytes), fmt.Sprintf("%.2f", res.SpeedRatio), fmt.Sprintf("%.3f", res.FileSizeRatio))
		t.Add("walctl 2.1", fmt.Sprintf("%.1f", res.Walctl21.MiBPerSec), fmt.Sprintf("%.2f", res.Walctl21.Seconds), fmt.Sprint(res.Walctl21.DataBytes), fmt.Sprintf("%.2f", res.SpeedRatio21), fmt.Sprintf("%.3f", res.FileSizeRatio21))
		t.Add("official", fmt.Sprintf("%.1f", res.Official.MiBPerSec), fmt.Sprintf("%.2f", res.Official.Seconds), fmt.Sprint(res.Official.DataBytes), "1.00", "1.000")
		return t
	})
}
