// Package walbench measures durable append throughput of the WAL engine
// against the disk's own sequential bandwidth, for `walctl bench wal` and
// `go test -bench`.
package walbench

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/walctl/walctl/internal/core/cpuload"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Config describes a benchmark run. Zero fields take the defaults.
type Config struct {
	// Dir is where the scratch WAL directories and the dd file are created
	// (and removed afterwards). It should be on the disk the WAL will use.
	Dir string
	// Producers lists the concurrent producer counts to measure; default
	// 1, 4 and 16.
	Producers []int
	// EntryBytes is the approximate size of one appended record batch;
	// default 1 MiB, dd's block size.
	EntryBytes int
	// BytesPerRun stops a run after this many bytes; default 512 MiB.
	BytesPerRun int64
	// MaxDuration stops a run after this long; default 10 s.
	MaxDuration time.Duration
	// DDMiB is the size of the dd comparison write; default 512.
	DDMiB int
	// Engine options for the WAL under test (age sealing is disabled).
	Engine wal.Options
	// NoTrim leaves sealed generations in place. By default they are
	// trimmed as they seal, as a publication keeping up does, and the
	// engine writes new generations over their files (recycled files):
	// the WAL's steady state.
	NoTrim bool
}

// Result is what Run measured. Rates are MiB/s (2^20 bytes per second).
type Result struct {
	Dir        string `json:"dir"`
	EntryBytes int    `json:"entry_bytes"`
	// DDs measure the disk before the first run, between runs and after
	// the last (shared disks drift); each run's ratio uses the higher of
	// the two around it. DD and DDAfter are the first and the last,
	// DDMiBps the mean of all.
	DDs     []DDResult  `json:"dd_runs"`
	DD      DDResult    `json:"dd"`
	DDAfter DDResult    `json:"dd_after"`
	DDMiBps float64     `json:"dd_mib_per_s"`
	Runs    []RunResult `json:"runs"`
}

// DDResult is the disk's own bandwidth: dd if=/dev/zero bs=1M
// conv=fdatasync, timed from process start to exit.
type DDResult struct {
	MiB     int     `json:"mib"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mib_per_s"`
	Output  string  `json:"output"`
}

// RunResult is one producer count's figures.
type RunResult struct {
	Producers int `json:"producers"`
	// Trimmed tells whether sealed generations were trimmed during the run
	// (Config.NoTrim unset).
	Trimmed bool    `json:"trimmed"`
	Appends int64   `json:"appends"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mib_per_s"`
	P50Ms   float64 `json:"p50_ack_ms"`
	P99Ms   float64 `json:"p99_ack_ms"`
	// DDMiBps is the higher of the dd measured right before and right
	// after this run (Around); Ratio is MiBps divided by it.
	DDMiBps float64 `json:"dd_mib_per_s"`
	Ratio   float64 `json:"ratio_to_dd"`
	// Load is how busy the machine's CPUs were while the producers ran.
	cpuload.Load
}

// Window is the measured stretch of a Drive: its seconds and how busy the
// machine's CPUs were over it.
type Window struct {
	Seconds float64
	cpuload.Load
}

func (c Config) withDefaults() Config {
	if len(c.Producers) == 0 {
		c.Producers = []int{1, 4, 16}
	}
	if c.EntryBytes <= 0 {
		c.EntryBytes = 1 << 20
	}
	if c.BytesPerRun <= 0 {
		c.BytesPerRun = 512 << 20
	}
	if c.MaxDuration <= 0 {
		c.MaxDuration = 10 * time.Second
	}
	if c.DDMiB <= 0 {
		c.DDMiB = 512
	}
	c.Engine.MaxGenerationAge = -1
	return c
}

// Run measures durable append throughput for each producer count, each in
// a fresh WAL directory under cfg.Dir that is removed afterwards, with dd
// before, between and after the runs (Bracket). Cancelling ctx stops the
// current measurement and returns ctx's error (wrapping
// errs.ErrUnavailable); scratch files are removed either way.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return Result{}, fmt.Errorf("benchmark directory not set: %w", errs.ErrInvalid)
	}
	res := Result{Dir: cfg.Dir, EntryBytes: cfg.EntryBytes}
	dds, err := Bracket(ctx, cfg.Dir, cfg.DDMiB, len(cfg.Producers), func(i int) error {
		r, err := runOnce(ctx, cfg, cfg.Producers[i])
		res.Runs = append(res.Runs, r)
		return err
	})
	if err != nil {
		return res, err
	}
	res.DDs, res.DD, res.DDAfter, res.DDMiBps = dds, dds[0], dds[len(dds)-1], MeanDD(dds)
	for i := range res.Runs {
		res.Runs[i].DDMiBps = Around(dds, i)
		res.Runs[i].Ratio = res.Runs[i].MiBps / res.Runs[i].DDMiBps
	}
	return res, nil
}

// Bracket runs measurements 0..n-1 with dd (of mib MiB under dir) before
// the first, between each two and after the last, every one of them after
// Settle, and returns the n+1 dd results in order: a measurement's disk is
// then the one measured right around it, not minutes away. Each measurement
// removes its scratch files before the next begins, so all start from the
// same state (a virtual disk whose host caches writes slows down once
// gigabytes written are kept; it does not when they are deleted).
func Bracket(ctx context.Context, dir string, mib, n int, measure func(i int) error) ([]DDResult, error) {
	dds := make([]DDResult, 0, n+1)
	for i := 0; ; i++ {
		dd, err := DD(ctx, dir, mib)
		if err != nil {
			return nil, err
		}
		if dds = append(dds, dd); i == n {
			return dds, nil
		}
		Settle()
		if err := measure(i); err != nil {
			return nil, err
		}
	}
}

// Around is the higher bandwidth of the dd measured right before and right
// after measurement i of Bracket: a ratio to it is one to the best the disk
// showed around the measurement, never flattered by a dd that ran while the
// disk was slowed.
func Around(dds []DDResult, i int) float64 { return max(dds[i].MiBps, dds[i+1].MiBps) }

// MeanDD is the mean bandwidth of dds.
func MeanDD(dds []DDResult) float64 {
	var sum float64
	for _, d := range dds {
		sum += d.MiBps
	}
	return sum / float64(len(dds))
}

// Settle flushes every filesystem (sync(2)) so that a measurement does not
// pay for earlier work still in the page cache or the journal: the scratch
// files a previous measurement removed (whose freed blocks a filesystem
// mounted with discard trims at its next journal commit) and dirty data.
func Settle() { syscall.Sync() }

// DD runs dd if=/dev/zero of=<dir>/ddtest bs=1M count=mib conv=fdatasync
// and reports its bandwidth. The file is removed afterwards. Like the
// appends it measures after Settle.
func DD(ctx context.Context, dir string, mib int) (DDResult, error) {
	path := filepath.Join(dir, "ddtest")
	defer os.Remove(path)
	Settle()
	cmd := exec.CommandContext(ctx, "dd", "if=/dev/zero", "of="+path, "bs=1M", fmt.Sprintf("count=%d", mib), "conv=fdatasync")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	secs := time.Since(start).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return DDResult{}, fmt.Errorf("dd: %w: %w", ctx.Err(), errs.ErrUnavailable)
		}
		return DDResult{}, fmt.Errorf("dd: %v: %s", err, out)
	}
	return DDResult{MiB: mib, Seconds: secs, MiBps: float64(mib) / secs, Output: string(out)}, nil
}

var schema = arrow.NewSchema([]arrow.Field{{Name: "payload", Type: arrow.BinaryTypes.Binary}}, nil)

// record builds one batch of about n bytes of random payload in 4 KiB rows.
func record(n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	row := make([]byte, 4096)
	for left := n; left > 0; left -= len(row) {
		rand.Read(row)
		b.Field(0).(*array.BinaryBuilder).Append(row[:min(left, len(row))])
	}
	return b.NewRecordBatch()
}

func runOnce(ctx context.Context, cfg Config, producers int) (RunResult, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "walbench-")
	if err != nil {
		return RunResult{}, err
	}
	defer os.RemoveAll(dir)
	e, err := wal.Open(dir, cfg.Engine)
	if err != nil {
		return RunResult{}, err
	}
	defer e.Close()
	if _, err := e.CreateTable(ctx, "bench", schema, 1); err != nil {
		return RunResult{}, err
	}
	// The producers' batches are built before the clock starts: making
	// random payloads is not the WAL's work, and 16 producers doing it at
	// once would starve the first appends of CPU.
	recs := make([]arrow.RecordBatch, producers)
	for p := range recs {
		recs[p] = record(cfg.EntryBytes)
		defer recs[p].Release()
	}
	// One untimed append per producer, all at once, first: it fills the
	// encoder's buffer pool and creates the first generation, which a
	// WAL in service has long done. Its bytes are not counted.
	warm, err := warmUp(ctx, e, recs)
	if err != nil {
		return RunResult{}, err
	}
	stopTrim := func() error { return nil }
	if !cfg.NoTrim {
		stopTrim = TrimSealed(ctx, e)
	}
	lat, w, firstErr := Drive(ctx, recs, cfg.BytesPerRun, cfg.EntryBytes, cfg.MaxDuration, func(ctx context.Context, rec arrow.RecordBatch) error {
		_, err := e.Append(ctx, "bench", 0, rec)
		return err
	})
	if err := stopTrim(); firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return RunResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return RunResult{}, fmt.Errorf("benchmark: %w: %w", err, errs.ErrUnavailable)
	}
	// Every producer appends the same batch, so every entry has the bytes
	// of a warm-up one.
	r := RunResult{Producers: producers, Trimmed: !cfg.NoTrim, Appends: int64(len(lat)), Bytes: int64(len(lat)) * (warm / int64(producers)),
		Seconds: w.Seconds, Load: w.Load}
	r.MiBps = float64(r.Bytes) / (1 << 20) / w.Seconds
	slices.Sort(lat)
	r.P50Ms = ms(Percentile(lat, 0.50))
	r.P99Ms = ms(Percentile(lat, 0.99))
	return r, nil
}

// TrimSealed trims the bench table's sealed generations in l as they seal,
// until the returned function is called, which returns the first failure.
// A trim is sent only when a generation sealed since the last one: on a
// replicated WAL every trim is a raft entry, which the measured appends
// would share the log and its fsyncs with.
func TrimSealed(ctx context.Context, l wal.Log) func() error {
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var trimmed uint64
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-t.C:
			}
			gens, err := l.Generations(ctx, "bench", 0)
			var through uint64
			for _, g := range gens {
				if g.Sealed {
					through = g.Last
				}
			}
			if err == nil && through > trimmed {
				if _, err = l.Trim(ctx, "bench", 0, through, 0); err == nil {
					trimmed = through
				}
			}
			if err != nil {
				done <- fmt.Errorf("trim behind the producers: %w", err)
				return
			}
		}
	}()
	return func() error {
		close(stop)
		return <-done
	}
}

// warmUp appends each batch once, concurrently, and returns the bytes the
// shard then holds.
func warmUp(ctx context.Context, e *wal.Engine, recs []arrow.RecordBatch) (int64, error) {
	var g errgroup.Group
	for _, rec := range recs {
		g.Go(func() error {
			_, err := e.Append(ctx, "bench", 0, rec)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	st, err := e.Stats(ctx, "bench", nil)
	if err != nil {
		return 0, err
	}
	return st.Shards[0].Bytes, nil
}

// Percentile is the q-quantile (0 < q <= 1) of sorted durations: the
// value at index ⌊q·n⌋ (the last for q = 1), 0 for none.
func Percentile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Record builds one benchmark batch of about n bytes (random 4 KiB rows) of
// Schema, for other benchmarks of the WAL (the replicated one).
func Record(n int) arrow.RecordBatch { return record(n) }

// Schema is the benchmark table's schema.
func Schema() *arrow.Schema { return schema }

// Latencies turns sorted ACK latencies into p50 and p99 milliseconds.
func Latencies(sorted []time.Duration) (p50, p99 float64) {
	return ms(Percentile(sorted, 0.50)), ms(Percentile(sorted, 0.99))
}

// Drive runs one producer per batch in recs, each appending its batch with
// appendFn until budget bytes (entry bytes per append) are spent or limit
// has passed, and returns every ACK latency, the measured window and the
// first error (which stops its producer).
func Drive(ctx context.Context, recs []arrow.RecordBatch, budget int64, entry int, limit time.Duration, appendFn func(context.Context, arrow.RecordBatch) error) ([]time.Duration, Window, error) {
	var (
		left     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	left.Store(budget)
	deadline := time.Now().Add(limit)
	cpu, start := cpuload.Now(), time.Now()
	for _, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for left.Add(-int64(entry)) >= 0 && time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := appendFn(ctx, rec); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, Window{Seconds: time.Since(start).Seconds(), Load: cpu.Busy(cpuload.Now())}, firstErr
}
