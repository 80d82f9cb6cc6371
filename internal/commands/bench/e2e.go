package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/e2ebench"
	"github.com/walctl/walctl/internal/core/worker"
)

// E2EOptions of `walctl bench e2e`.
type E2EOptions struct {
	out
	// Out receives the charts before the summary (text output only).
	Out  io.Writer
	JSON bool
	Dir  string
	// Rate is --rate as given: a rate (200MiB/s) or a share of dd (50%).
	Rate   string
	Config e2ebench.Config
	// FindMax, when set, are the shares of dd that --find-max steps through.
	FindMax []float64
	// CPUProfile, when set, is where the CPU profile of the whole run goes.
	CPUProfile string
}

// NewCmdE2E returns `bench e2e`.
func NewCmdE2E(f *cmdutil.Factory, runF func(context.Context, *E2EOptions) error) *cobra.Command {
	opts := &E2EOptions{out: out{ErrOut: f.IOStreams.ErrOut, Print: f.Print}, Out: f.IOStreams.Out}
	var entry int64 = e2ebench.DefaultEntryBytes
	var findMax []string
	cmd := &cobra.Command{
		Use:   "e2e [--duration 10m] [--rate 50%|200MiB/s]",
		Short: "Sustained end-to-end throughput and freshness: producers at a target rate while a worker publishes",
		Long: `Run the whole pipeline for a fixed time on this machine's disk: producers
append to the WAL at --rate (a rate such as 200MiB/s, or a share of the disk's
dd conv=fdatasync bandwidth measured at the start of the run, such as 50%)
while a worker publishes continuously into Lance. Everything runs in this one
process on the embedded default, in a scratch directory under --dir: an
embedded etcd, the in-process WAL engine and a local Lance root (removed
afterwards unless --keep). The generation age limit is --wal-generation-age;
freshness is to be read against it.

Reported: ACKed MiB/s; published MiB/s (bytes visible in a published Lance
version by the time the producers stop); the freshness of every entry, the time
from its ACK to its first visibility in a published version (the table's
latest version is read every 100 ms; p50, p99, max); the backlog (ACKed bytes
and entries not yet visible) every second, its slope and whether it stayed
bounded (mean of the last third of the run no higher than the mean of the
middle third plus two seconds of the ACKed rate); the process's peak resident
set (VmHWM: producers, WAL, etcd and worker all in-process); how many of the
machine's CPUs were busy on average while the producers appended (/proc/stat);
and the ratio to dd measured right before and right after the run (the higher
of the two). Once
the producers stop, the run waits for the last entries to be published.

With --find-max 25%,50%,75%,100% it steps the rate up through those shares of
dd, one run of --duration each in a fresh scratch directory, and stops after
the first whose backlog did not stay bounded or did not drain: one row per
step, and the highest rate held on stderr (without the charts).

Text output is a chart of freshness (the oldest entry made visible in each
second; blank where none was) and of the backlog over time, then a summary;
--output json gives the summary and the series, one sample per second.
Progress goes to stderr. Figures are recorded, never asserted. --cpuprofile
FILE writes a CPU profile of the whole run (read it with go tool pprof).

EXIT STATUS
  0 measured (also when the backlog grew or did not drain: see "drained"
    and "bounded"), 2 bad flags, or a run whose data (up to rate × duration:
    the table keeps every ACKed byte) would not fit under --dir, refused
    before it writes, 5 the disk, etcd, the WAL or the worker failed.`,
		Example: "  walctl bench e2e\n  walctl bench e2e --duration 1m --rate 50% --wal-generation-age 2s\n" +
			"  walctl bench e2e --duration 2m --rate 200MiB/s --output json > e2e.json\n" +
			"  walctl bench e2e --duration 10s --rate 4MiB/s --dd-mib 16 --keep\n" +
			"  walctl bench e2e --find-max 25%,50%,75%,100% --duration 2m --wal-generation-age 2s",
		Args: cmdutil.ExactArgs(0, "bench e2e takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := &opts.Config
			c.EntryBytes = entry
			if err := opts.parseRates(findMax); err != nil {
				return err
			}
			if c.Duration <= 0 || c.DDMiB <= 0 || c.Producers <= 0 || c.Shards <= 0 || c.EntryBytes <= 0 {
				return cmdutil.FlagErrorf("--duration, --dd-mib, --producers, --shards and --entry-bytes must be positive")
			}
			opts.DataDir, opts.JSON = f.Global().DataDir, f.JSON()
			c.Engine = f.WALEngineOptions()
			if c.Engine.MaxGenerationAge == 0 {
				return cmdutil.FlagErrorf("--wal-generation-age must not be 0 (negative: no age sealing)")
			}
			c.Publish = f.PublicationConfig(f.Owner(coord.OwnerWorker))
			c.ClaimTTL = f.Config.Duration(cmdutil.KeyClaimTTL)
			c.Worker = worker.Config{PollInterval: f.Config.Duration(cmdutil.KeyWorkerPoll)}
			c.Log, c.Logger = opts.ErrOut, f.Logger
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return e2eRun(cmd.Context(), opts)
		},
	}
	addE2EFlags(cmd, opts, &entry, &findMax)
	return cmd
}

// addE2EFlags registers bench e2e's flags into opts, entry and findMax.
func addE2EFlags(cmd *cobra.Command, opts *E2EOptions, entry *int64, findMax *[]string) {
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "scratch directory on the disk to measure (default <data-dir>/bench)")
	cmd.Flags().DurationVar(&opts.Config.Duration, "duration", e2ebench.DefaultDuration, "how long the producers append")
	cmd.Flags().StringVar(&opts.Rate, "rate", "50%", "target ingest rate: bytes per second (200MiB/s) or a share of dd (50%)")
	cmd.Flags().IntVar(&opts.Config.DDMiB, "dd-mib", e2ebench.DefaultDDMiB, "MiB written by each dd measurement")
	cmd.Flags().IntVar(&opts.Config.Producers, "producers", e2ebench.DefaultProducers, "concurrent producers")
	cmd.Flags().IntVar(&opts.Config.Shards, "shards", e2ebench.DefaultShards, "shards of the benchmark table")
	cmd.Flags().Var(&cmdutil.ByteSize{V: entry}, "entry-bytes", "bytes per appended record batch (WAL entry)")
	cmd.Flags().BoolVar(&opts.Config.Keep, "keep", false, "keep the scratch directory (etcd, WAL, tables)")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the run (producers, WAL, worker: one process) to FILE")
	cmd.Flags().StringSliceVar(findMax, "find-max", nil, "step through these shares of dd (e.g. 25%,50%,75%,100%), one run of --duration each, up to the first whose backlog grows")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.PublicationKeys...)
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.KeyWorkerPoll)
}

// parseRates sets the run's rate (bytes per second or a share of dd) from
// --rate and the --find-max steps (shares of dd only).
func (opts *E2EOptions) parseRates(findMax []string) error {
	rate, share, err := parseRate(opts.Rate)
	if err != nil {
		return err
	}
	opts.Config.Rate, opts.Config.RateOfDD = rate, share
	opts.FindMax = nil
	for _, step := range findMax {
		r, share, err := parseRate(step)
		if err != nil || r != 0 {
			return cmdutil.FlagErrorf("--find-max %q: give shares of dd, e.g. 25%%,50%%,75%%", step)
		}
		opts.FindMax = append(opts.FindMax, share)
	}
	return nil
}

// parseRate reads --rate: "50%" is a share of dd (0.5), anything else a
// size per second ("200MiB/s", "200MiB").
func parseRate(s string) (bytesPerSecond, shareOfDD float64, err error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) {
			return 0, 0, cmdutil.FlagErrorf("--rate %q: a share of dd is a positive percentage, e.g. 50%%", s)
		}
		return 0, v / 100, nil
	}
	n, err := humanize.ParseBytes(strings.TrimSuffix(s, "/s"))
	if err != nil || n == 0 {
		return 0, 0, cmdutil.FlagErrorf("--rate %q: give a rate such as 200MiB/s or a share of dd such as 50%%", s)
	}
	return float64(n), 0, nil
}

func e2eRun(ctx context.Context, opts *E2EOptions) error {
	c := opts.Config
	c.Dir = opts.Dir
	if c.Dir == "" {
		c.Dir = filepath.Join(opts.DataDir, "bench")
	}
	if opts.CPUProfile != "" {
		stop, err := cmdutil.CPUProfile(opts.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if len(opts.FindMax) > 0 {
		return findMaxRun(ctx, opts, c)
	}
	res, err := e2ebench.Run(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "dd conv=fdatasync: %.1f, %.1f MiB/s (before and after the run)\n", res.DDBefore.MiBps, res.DDAfter.MiBps)
	if c.Keep {
		fmt.Fprintf(opts.ErrOut, "kept %s\n", res.Dir)
	}
	if !opts.JSON {
		if err := e2eCharts(opts.Out, res); err != nil {
			return err
		}
	}
	return opts.Print(res, func() *render.Table { return e2eTable(res) })
}

// findMaxRun steps the rate up and prints one row per step.
func findMaxRun(ctx context.Context, opts *E2EOptions, c e2ebench.Config) error {
	res, err := e2ebench.FindMax(ctx, c, opts.FindMax)
	if err != nil {
		return err
	}
	if res.Highest != nil {
		fmt.Fprintf(opts.ErrOut, "highest rate held: %.0f%% of dd, %.1f MiB/s ACKed\n", res.Highest.Share*100, res.Highest.AckedMiBps)
	} else {
		fmt.Fprintln(opts.ErrOut, "no step held: the backlog grew (or did not drain) at the lowest rate")
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("share of dd", "target MiB/s", "ACKed MiB/s", "published MiB/s", "p99 freshness", "max freshness", "backlog slope", "held")
		for _, s := range res.Steps {
			t.Add(fmt.Sprintf("%.0f%%", s.Share*100), fmt.Sprintf("%.1f", s.TargetMiBps), fmt.Sprintf("%.1f", s.AckedMiBps), fmt.Sprintf("%.1f", s.PublishedMiBps),
				fmt.Sprintf("%.2fs", s.Freshness.P99), fmt.Sprintf("%.2fs", s.Freshness.Max), fmt.Sprintf("%+.1f MiB/min", s.Backlog.SlopeMiBPerMin), fmt.Sprint(s.Held))
		}
		return t
	})
}

// e2eCharts draws freshness and backlog over time.
func e2eCharts(w io.Writer, res e2ebench.Result) error {
	fresh := make([]float64, len(res.Samples))
	backlog := make([]float64, len(res.Samples))
	for i, s := range res.Samples {
		fresh[i] = math.NaN()
		if s.Visible > 0 {
			fresh[i] = s.Freshness.Max
		}
		backlog[i] = s.BacklogMiB
	}
	step := e2ebench.DefaultSampleEvery.Seconds()
	if err := render.Chart(w, render.Series{Title: "freshness: oldest entry made visible each second", Unit: "s", Step: step, Values: fresh}, 72, 6); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := render.Chart(w, render.Series{Title: "backlog: ACKed, not yet visible", Unit: "MiB", Step: step, Values: backlog}, 72, 6); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// e2eTable is the summary.
func e2eTable(res e2ebench.Result) *render.Table {
	t := render.NewTable("figure", "value")
	target := fmt.Sprintf("%.1f MiB/s", res.TargetMiBps)
	if res.RateOfDD > 0 {
		target += fmt.Sprintf(" (%.0f%% of dd)", res.RateOfDD*100)
	}
	rss := make([]string, len(res.PeakRSS))
	for i, p := range res.PeakRSS {
		rss[i] = fmt.Sprintf("%.0f MiB: %s", p.MiB, p.Process)
	}
	f := res.Freshness
	t.Add("duration", fmt.Sprintf("%s, generation age %s", secs(res.ProduceSeconds), secs(res.GenerationAge)))
	t.Add("target rate", target)
	t.Add("ACKed", fmt.Sprintf("%.1f MiB/s (%s entries, %s rows)", res.AckedMiBps, humanize.Comma(res.AckedEntries), humanize.Comma(res.AckedRows)))
	t.Add("published", fmt.Sprintf("%.1f MiB/s", res.PublishedMiBps))
	t.Add("freshness", fmt.Sprintf("p50 %.2fs, p99 %.2fs, max %.2fs (%s entries)", f.P50, f.P99, f.Max, humanize.Comma(f.Count)))
	t.Add("backlog", fmt.Sprintf("max %.1f MiB, slope %+.2f MiB/min, bounded %v", res.Backlog.MaxMiB, res.Backlog.SlopeMiBPerMin, res.Backlog.Bounded))
	t.Add("drained", fmt.Sprintf("%v after %s (%s of %s entries visible)", res.Drained, secs(res.DrainSeconds), humanize.Comma(res.VisibleEntries), humanize.Comma(res.AckedEntries)))
	t.Add("peak RSS", strings.Join(rss, "; "))
	t.Add("dd", fmt.Sprintf("%.1f MiB/s", res.DDMiBps))
	t.Add("ratio to dd", fmt.Sprintf("ACKed %.2f, published %.2f", res.AckedRatioToDD, res.PublishedRatioToDD))
	t.Add("CPUs busy", res.Load.Text()+" (the machine's, while the producers appended)")
	return t
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}
