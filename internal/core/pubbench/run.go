package pubbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dustin/go-humanize"

	"github.com/walctl/walctl/internal/core/cpuload"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// BenchTable is the table the publication benchmark creates in its scratch
// directories.
const BenchTable = "bench"

// ModeResult is one mode's publication, as the measured child reports it
// (bytes, rows, files, rounds, seconds, MiB/s) completed by Run.
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
	// DDSameSize is dd conv=fdatasync of as many MiB as the publication
	// wrote, right after it (its scratch data removed first), on a local
	// root; RatioToDDSameSize is MiBps over it. A short dd measures what
	// the page cache absorbs at once; one of the publication's own size
	// measures what the machine sustains for that much (see Run).
	DDSameSize        *walbench.DDResult `json:"dd_same_size,omitempty"`
	RatioToDDSameSize float64            `json:"ratio_to_dd_same_size,omitempty"`
	// Load is how busy the machine's CPUs were over the publication (the
	// child's window).
	cpuload.Load
	// WallSeconds is the child's whole life (etcd start, open, exit).
	WallSeconds float64 `json:"wall_seconds"`
	// Put is the raw PutObject baseline of a publication to an object
	// store (nil on a local root); RatioToPut is the publication's rate of
	// data-file bytes over the baseline's: Put.Seconds / Seconds.
	Put        *PutResult `json:"raw_put,omitempty"`
	RatioToPut float64    `json:"ratio_to_raw_put,omitempty"`
}

// Result is the outcome of Run (the JSON shape of `walctl bench publish`).
type Result struct {
	Dir     string    `json:"dir"`
	Size    int64     `json:"size"`
	Budget  int64     `json:"budget"`
	Backlog []Backlog `json:"backlog"`
	// DDs are the dd measurements of the run in order: one on the quiet
	// disk before any backlog, then per mode the ones after its backlog was
	// built (repeated until the disk settled; the last is right before the
	// publication) and the one right after the publication. DD and DDAfter
	// are the first and the last, DDMiBps the mean of all.
	DDs     []walbench.DDResult `json:"dd_runs"`
	DD      walbench.DDResult   `json:"dd"`
	DDAfter walbench.DDResult   `json:"dd_after"`
	DDMiBps float64             `json:"dd_mib_per_s"`
	Runs    []ModeResult        `json:"runs"`
}

// Config configures Run.
type Config struct {
	// Root is the scratch directory; each mode's data dir is Root/<mode>,
	// removed after its run unless Keep.
	Root   string
	Size   int64
	Budget int64
	Modes  []string
	DDMiB  int
	Keep   bool
	// Exe and Args start the measured child; ChildEnv gives its
	// environment for a mode and its data dir. The child prints one
	// ModeResult as JSON on stdout.
	Exe      string
	Args     []string
	ChildEnv func(mode, dataDir string) []string
	// Log receives one line per step (and the child's stderr).
	Log io.Writer
	// Store, when the tables live on an object store, is the run's prefix
	// there: each mode's child publishes under Store's <mode>/ (ChildEnv
	// points it there), and the same bytes are then put raw under
	// raw-<mode>/ for the baseline. Nil on a local root.
	Store objstore.Store
}

// Run measures publication for each mode: it builds a backlog of Size in
// the mode's scratch data dir, measures the disk with dd, publishes in a
// child process, measures dd again, and relates every mode's MiB/s to the
// best dd of the run. On a local root it then removes the scratch data and
// runs dd once more over the publication's own size: on the development VM
// (a host that takes back free guest memory, free page reporting, and backs
// it again on first touch at ~11 µs per 4 KiB page) a 512 MiB dd wrote
// through recycled page cache at 1.3-1.6 GB/s and a 4 GiB dd, growing the
// page cache into new memory, at 0.35-0.48 GB/s (1.7-1.9 GB/s with the
// reporting switched off): the short dd is a burst a publication of
// gigabytes cannot ride. Cancellation stops at the next step (the child is
// killed); scratch data is removed unless Keep.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Dir: cfg.Root, Size: cfg.Size, Budget: cfg.Budget, Backlog: []Backlog{}, Runs: []ModeResult{}}
	fmt.Fprintf(cfg.Log, "measuring the disk under %s with dd (%d MiB, conv=fdatasync) around each mode…\n", cfg.Root, cfg.DDMiB)
	if len(cfg.Modes) > 0 {
		quiet, err := walbench.DD(ctx, cfg.Root, cfg.DDMiB)
		if err != nil {
			return res, err
		}
		res.DDs = append(res.DDs, quiet)
	}
	for _, mode := range cfg.Modes {
		r, bl, dds, err := runMode(ctx, cfg, mode, bestDD(res.DDs))
		if err != nil {
			return res, err
		}
		res.Backlog, res.Runs, res.DDs = append(res.Backlog, bl), append(res.Runs, r), append(res.DDs, dds...)
	}
	if len(res.DDs) == 0 {
		return res, nil
	}
	res.DD, res.DDAfter, res.DDMiBps = res.DDs[0], res.DDs[len(res.DDs)-1], walbench.MeanDD(res.DDs)
	best := bestDD(res.DDs)
	for i := range res.Runs {
		res.Runs[i].DDMiBps = best
		if best > 0 {
			res.Runs[i].RatioToDD = res.Runs[i].MiBps / best
		}
	}
	return res, nil
}

func bestDD(dds []walbench.DDResult) float64 {
	best := 0.0
	for _, d := range dds {
		best = max(best, d.MiBps)
	}
	return best
}

// Settling: after a backlog is built, dd runs again until it measures at
// least settledShare of the disk's best so far in the run, at most
// settleRuns times. A backlog of gigabytes written in seconds is still
// being absorbed by the device when sync(2) returns (on the development VM
// dd measured 310-345 MiB/s right after a 4 GiB backlog, 1,260-1,585 a
// publication later): a publication started then measures the backlog's
// writing, not itself. A backlog accumulates over time in production.
const (
	settledShare = 0.75
	settleRuns   = 8
)

func runMode(ctx context.Context, cfg Config, mode string, quiet float64) (ModeResult, Backlog, []walbench.DDResult, error) {
	var r ModeResult
	dir := filepath.Join(cfg.Root, mode)
	fmt.Fprintf(cfg.Log, "%s: building a %s backlog…\n", mode, humanize.IBytes(uint64(cfg.Size)))
	bl, err := backlogIn(ctx, dir, cfg.Size)
	if err != nil {
		return r, bl, nil, err
	}
	// dd right before and right after the publication, with the backlog in
	// place, once the disk has settled.
	var dds []walbench.DDResult
	for len(dds) < settleRuns {
		before, err := walbench.DD(ctx, cfg.Root, cfg.DDMiB)
		if err != nil {
			return r, bl, dds, err
		}
		dds = append(dds, before)
		if before.MiBps >= settledShare*max(quiet, bestDD(dds[:len(dds)-1])) {
			break
		}
		fmt.Fprintf(cfg.Log, "%s: the disk is still settling after the backlog (dd %.0f MiB/s)…\n", mode, before.MiBps)
	}
	fmt.Fprintf(cfg.Log, "%s: publishing %s in a child process (budget %s)…\n", mode, humanize.IBytes(uint64(bl.Bytes)), humanize.IBytes(uint64(cfg.Budget)))
	walbench.Settle()
	c, err := RunChild(ctx, cfg.Exe, cfg.Args, cfg.ChildEnv(mode, dir), cfg.Log)
	if err != nil {
		return r, bl, nil, err
	}
	if err := json.Unmarshal(c.Stdout, &r); err != nil {
		return r, bl, nil, fmt.Errorf("child output %q: %v", c.Stdout, err)
	}
	after, err := walbench.DD(ctx, cfg.Root, cfg.DDMiB)
	if err != nil {
		return r, bl, nil, err
	}
	r.Mode, r.PeakRSS, r.WallSeconds = mode, c.PeakRSS, c.Wall.Seconds()
	r.PeakRSSMiB = float64(c.PeakRSS) / (1 << 20)
	if cfg.Store != nil {
		if err := rawPut(ctx, cfg, mode, &r); err != nil {
			return r, bl, nil, err
		}
	}
	if !cfg.Keep {
		_ = os.RemoveAll(dir)
	}
	if cfg.Store == nil {
		if err := sameSizeDD(ctx, cfg, &r); err != nil {
			return r, bl, nil, err
		}
	}
	return r, bl, append(dds, after), nil
}

// sameSizeDD runs dd over as many MiB as r's publication wrote and relates
// the publication's MiB/s to it.
func sameSizeDD(ctx context.Context, cfg Config, r *ModeResult) error {
	mib := int(max(1, (r.Bytes+(1<<20)-1)>>20))
	fmt.Fprintf(cfg.Log, "%s: dd of the publication's size (%d MiB)…\n", r.Mode, mib)
	same, err := walbench.DD(ctx, cfg.Root, mib)
	if err != nil {
		return err
	}
	r.DDSameSize = &same
	if same.MiBps > 0 {
		r.RatioToDDSameSize = r.MiBps / same.MiBps
	}
	return nil
}

// rawPut measures the raw PutObject baseline of mode's publication: the
// sizes of the data files it wrote, put again to the same store.
func rawPut(ctx context.Context, cfg Config, mode string, r *ModeResult) error {
	sizes, err := DataFileSizes(ctx, cfg.Store.Sub(mode), BenchTable)
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Log, "%s: raw PutObject of the same %d files to %s…\n", mode, len(sizes), cfg.Store)
	put, err := PutThroughput(ctx, cfg.Store, "raw-"+mode, sizes)
	if err != nil {
		return err
	}
	r.Put = &put
	if r.Seconds > 0 {
		r.RatioToPut = put.Seconds / r.Seconds
	}
	return nil
}

// backlogIn builds the mode's backlog in dir's WAL with the engine's
// default options, then closes it for the child to open.
func backlogIn(ctx context.Context, dir string, size int64) (Backlog, error) {
	log, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		return Backlog{}, err
	}
	bl, err := MakeBacklog(ctx, log, BacklogOptions{Table: BenchTable, Bytes: size})
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	return bl, err
}
