// Package e2ebench is `walctl bench e2e`: the sustained end-to-end
// benchmark. Producers append to the WAL at a target rate while a worker
// publishes continuously, for a fixed time, on the embedded default (an
// embedded etcd, the in-process WAL engine on a scratch directory, a local
// Lance root) — all in this one process. It reports ACKed and published
// MiB/s, the freshness of every entry (ACK to first visibility in a
// published Lance version), the backlog over time, the process's peak RSS
// and the ratio to the disk's dd conv=fdatasync bandwidth measured in the
// same run.
package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/cpuload"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/producer"
	"github.com/walctl/walctl/internal/core/pubbench"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/wal/walbench"
	"github.com/walctl/walctl/internal/core/worker"
)

// reuseValues is how many batches' values each producer generates and
// then appends again in turn with fresh ids: generating random values costs
// more CPU than appending them (about 75 MiB/s a core), and the benchmark
// measures the pipeline, not the generator.
const reuseValues = 8

// Table is the table the benchmark creates in its scratch directory (the
// schema of pubbench.Schema).
const Table = pubbench.BenchTable

// Defaults of Config fields left zero.
const (
	DefaultDuration     = 10 * time.Minute
	DefaultRateOfDD     = 0.5
	DefaultDDMiB        = 512
	DefaultProducers    = 4
	DefaultShards       = 4
	DefaultEntryBytes   = 1 << 20
	DefaultObserveEvery = 100 * time.Millisecond
	DefaultSampleEvery  = time.Second
)

// Config configures Run.
type Config struct {
	// Dir is the scratch root: the run works in a new directory under it
	// (etcd, wal, tables, the dd file), removed afterwards unless Keep.
	Dir  string
	Keep bool
	// Duration is how long the producers append (default 10 minutes).
	Duration time.Duration
	// Rate is the target ingest rate of all producers together, bytes per
	// second; when 0 it is RateOfDD (default 0.5) of the dd bandwidth
	// measured at the start of the run.
	Rate     float64
	RateOfDD float64
	// DDMiB is the size of each dd measurement (default 512).
	DDMiB int
	// Producers append concurrently to Shards shards entries of about
	// EntryBytes (defaults 4, 4, 1 MiB).
	Producers  int
	Shards     int
	EntryBytes int64
	// Engine configures the WAL engine (its MaxGenerationAge is the
	// generation age limit that freshness is to be read against).
	Engine wal.Options
	// Publish configures the worker's publisher (limits, budget, permits,
	// preparation mode, owner: a worker of this process by default);
	// LanceRoot and Store are set by Run.
	Publish publish.Config
	// ClaimTTL is the lease TTL of the worker's claim (coord's default if 0).
	ClaimTTL time.Duration
	// Worker configures the worker (poll interval, slices); Tables, Log,
	// Clock and Logger are set by Run.
	Worker worker.Config
	// ObserveEvery is how often the table's latest version is read
	// (default 100 ms); SampleEvery how often the series is sampled
	// (default 1 s).
	ObserveEvery time.Duration
	SampleEvery  time.Duration
	// DrainTimeout bounds the wait, once the producers stopped, for every
	// ACKed entry to become visible (default 2 × the generation age + 60 s).
	DrainTimeout time.Duration
	// ProgressEvery is how often a progress line goes to Log (default
	// every 10 s).
	ProgressEvery time.Duration
	// Clock drives every wait and timestamp (default the real clock).
	Clock clock.WithTicker
	// Log receives one line per step and the progress lines; Logger the
	// warnings and errors of the WAL engine and the worker (default:
	// discarded).
	Log    io.Writer
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("benchmark directory not set: %w", errs.ErrInvalid)
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Rate < 0 || c.RateOfDD < 0 {
		return c, fmt.Errorf("the ingest rate must be positive: %w", errs.ErrInvalid)
	}
	if c.Rate == 0 && c.RateOfDD == 0 {
		c.RateOfDD = DefaultRateOfDD
	}
	if c.DDMiB <= 0 {
		c.DDMiB = DefaultDDMiB
	}
	if c.Producers <= 0 {
		c.Producers = DefaultProducers
	}
	if c.Shards <= 0 {
		c.Shards = DefaultShards
	}
	if c.EntryBytes <= 0 {
		c.EntryBytes = DefaultEntryBytes
	}
	if c.Engine.MaxGenerationAge == 0 {
		c.Engine.MaxGenerationAge = wal.DefaultMaxGenerationAge
	}
	if c.ObserveEvery <= 0 {
		c.ObserveEvery = DefaultObserveEvery
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 2*max(c.Engine.MaxGenerationAge, 0) + time.Minute
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Publish.Owner.ID == "" {
		host, _ := os.Hostname()
		c.Publish.Owner = coord.Owner{ID: fmt.Sprintf("bench-e2e/%s/%d", host, os.Getpid()), Kind: coord.OwnerWorker, Host: host, PID: os.Getpid()}
	}
	// A round or a seal every second logs at info: the run's own lines
	// say more; keep the components' warnings and errors.
	c.Logger = slog.New(warnings{c.Logger.Handler()})
	return c, nil
}

// warnings passes on records of level Warn and above.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(g string) slog.Handler       { return warnings{w.Handler.WithGroup(g)} }

// stack is the run's embedded default: etcd, its client, the WAL engine.
type stack struct {
	etcd *etcdembed.Server
	co   *coord.Client
	log  *wal.Engine
}

func startStack(ctx context.Context, dir string, cfg Config) (*stack, error) {
	s := &stack{}
	var err error
	if s.etcd, err = etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(dir, "etcd")}); err != nil {
		return nil, err
	}
	if s.co, err = coord.Connect(ctx, coord.Config{Endpoints: []string{s.etcd.Endpoint()}, ClaimTTL: cfg.ClaimTTL}); err != nil {
		s.close()
		return nil, err
	}
	eng := cfg.Engine
	eng.Logger = cfg.Logger
	if s.log, err = wal.Open(filepath.Join(dir, "wal"), eng); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *stack) close() {
	if s.log != nil {
		_ = s.log.Close()
	}
	if s.co != nil {
		_ = s.co.Close()
	}
	s.etcd.Close()
}

// Run measures dd, then appends at the target rate for cfg.Duration while
// an in-process worker publishes, observing the table's latest version
// every ObserveEvery and sampling the series every SampleEvery; once the
// producers stop it waits (at most DrainTimeout) for every ACKed entry to
// become visible, stops the worker and measures dd again. Cancelling ctx
// stops the run at its next step and returns ctx's error (wrapping
// errs.ErrUnavailable); the scratch directory is removed unless Keep.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp(cfg.Dir, "e2e-")
	if err != nil {
		return Result{}, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	res := newResult(dir, cfg)
	fmt.Fprintf(cfg.Log, "measuring the disk under %s with dd (%d MiB, conv=fdatasync)…\n", dir, cfg.DDMiB)
	if res.DDBefore, err = walbench.DD(ctx, dir, cfg.DDMiB); err != nil {
		return res, err
	}
	rate := cfg.Rate
	if rate == 0 {
		rate = cfg.RateOfDD * res.DDBefore.MiBps * (1 << 20)
	}
	res.TargetMiBps = rate / (1 << 20)
	if err := checkSpace(cfg.Dir, rate, cfg.Duration); err != nil {
		return res, err
	}
	st, err := startStack(ctx, dir, cfg)
	if err != nil {
		return res, err
	}
	defer st.close()
	info, err := st.log.CreateTable(ctx, Table, pubbench.Schema, cfg.Shards)
	if err != nil {
		return res, err
	}
	rows, err := pubbench.EntryRows(info.Schema, cfg.EntryBytes, 1, 0)
	if err != nil {
		return res, err
	}
	m := &measurement{cfg: cfg, root: filepath.Join(dir, "tables"), tracker: NewTracker(cfg.Clock.Now())}
	stopWorker := m.startWorker(ctx, st)
	defer stopWorker()
	stopWatch := m.watch(ctx)
	defer stopWatch()

	if err := m.produce(ctx, st, info, rows, rate, &res); err != nil {
		return res, err
	}
	atEnd := m.tracker.Totals(cfg.Clock.Now())
	res.setRates(atEnd)
	if cfg.Engine.MaxGenerationAge < 0 { // no age sealing: seal what is open
		for s := 0; s < cfg.Shards; s++ {
			if _, err := st.log.Seal(ctx, Table, s); err != nil {
				return res, err
			}
		}
	}
	fmt.Fprintf(cfg.Log, "producers stopped: %d entries ACKed; waiting for the last to be published…\n", atEnd.AckedEntries)
	drainStart := cfg.Clock.Now()
	res.Drained = m.drain(ctx)
	res.DrainSeconds = cfg.Clock.Since(drainStart).Seconds()
	stopWatch()
	if err := stopWorker(); err != nil {
		return res, fmt.Errorf("worker: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("benchmark: %w: %w", err, errs.ErrUnavailable)
	}
	if err := m.finish(&res); err != nil {
		return res, err
	}
	res.PeakRSS = []ProcessRSS{selfRSS()}
	if res.DDAfter, err = walbench.DD(ctx, dir, cfg.DDMiB); err != nil {
		return res, err
	}
	res.setDD()
	return res, nil
}

// spareBytes is what a run needs on its disk beyond its table's data: the
// WAL's unpublished and recycled generations, etcd, dd's scratch file.
const spareBytes = 2 << 30

// checkSpace refuses a run whose data would not fit under dir: every ACKed
// byte stays in the table, so a run at rate for d writes about rate × d
// (at most: producers may fall short of the target). A disk filled halfway
// through fails every writer on it, not only the benchmark; on the
// development VM, 2 minutes at 50% of a 1.5 GB/s dd would need ~90 GiB.
func checkSpace(dir string, rate float64, d time.Duration) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space under %s: %w", dir, err)
	}
	free := float64(st.Bavail) * float64(st.Bsize)
	if need := rate*d.Seconds() + spareBytes; need > free {
		return fmt.Errorf("at %.0f MiB/s for %s the run would write up to %s under %s, which has %s free: shorten --duration or lower --rate: %w",
			rate/(1<<20), d, humanize.IBytes(uint64(need)), dir, humanize.IBytes(uint64(free)), errs.ErrInvalid)
	}
	return nil
}

// produce runs the producers at rate for cfg.Duration, recording each ACK
// in the tracker and the producing time and unknown outcomes in res.
func (m *measurement) produce(ctx context.Context, st *stack, info wal.TableInfo, rows int, rate float64, res *Result) error {
	cfg := m.cfg
	fmt.Fprintf(cfg.Log, "appending at %.1f MiB/s for %s (%d producers, %d shards, generation age %s) while a worker publishes…\n",
		res.TargetMiBps, cfg.Duration, cfg.Producers, cfg.Shards, cfg.Engine.MaxGenerationAge)
	prodCtx, cancel := context.WithCancel(ctx)
	timer := cfg.Clock.NewTimer(cfg.Duration)
	go func() {
		select {
		case <-timer.C():
			cancel()
		case <-prodCtx.Done():
		}
	}()
	cpu, start := cpuload.Now(), cfg.Clock.Now()
	results, lerr := producer.Load(prodCtx, st.log, producer.LoadConfig{
		Table: Table, Info: info, Producers: cfg.Producers, BatchRows: rows, BytesPerSecond: rate,
		Seed: 1, FirstID: 1, Clock: cfg.Clock, ReuseValues: reuseValues,
		OnAckAt: func(shard int, pos uint64, rows, bytes int64) {
			m.tracker.Acked(shard, pos, rows, bytes, cfg.Clock.Now())
		},
	})
	timer.Stop()
	cancel()
	res.ProduceSeconds = cfg.Clock.Since(start).Seconds()
	res.Load = cpu.Busy(cpuload.Now())
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("benchmark: %w: %w", err, errs.ErrUnavailable)
	}
	if lerr != nil {
		return lerr
	}
	for _, r := range results {
		res.Unknown += int64(len(r.Unknown))
	}
	return nil
}

// measurement is the running part of Run: the worker, the observer and the
// sampler around one tracker.
type measurement struct {
	cfg        Config
	root       string // the Lance root
	tracker    *Tracker
	workerDone chan struct{} // closed when the worker's Run returned

	mu       sync.Mutex // guards the fields below
	samples  []Sample
	versions int   // distinct table versions observed
	obsErr   error // the last failed observation
	table    *lance.Manifest
}

// startWorker starts an in-process worker publishing Table; stop cancels
// it and returns what its Run returned (idempotent). Run fails at once, and
// closes m.workerDone, on a bad configuration or an unknown table.
func (m *measurement) startWorker(ctx context.Context, st *stack) (stop func() error) {
	pc := m.cfg.Publish
	pc.LanceRoot, pc.Store, pc.Logger = m.root, nil, m.cfg.Logger
	pc.ClaimOptions = append(pc.ClaimOptions, coord.WithSlice(m.cfg.Worker.Slice))
	wc := m.cfg.Worker
	wc.Tables, wc.Log, wc.Clock, wc.Logger = []string{Table}, st.log, m.cfg.Clock, m.cfg.Logger
	w := worker.New(publish.New(st.log, st.co, pc), st.co, wc)
	wctx, cancel := context.WithCancel(ctx)
	m.workerDone = make(chan struct{})
	var runErr error
	go func() {
		defer close(m.workerDone)
		runErr = w.Run(wctx)
	}()
	var once sync.Once
	return func() error {
		once.Do(func() {
			cancel()
			<-m.workerDone
		})
		return runErr
	}
}

// watch starts the observer (every ObserveEvery) and the sampler (every
// SampleEvery); stop ends both (idempotent).
func (m *measurement) watch(ctx context.Context) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	obs := &observer{root: filepath.Join(m.root, Table+".lance")}
	wg.Go(func() {
		t := m.cfg.Clock.NewTicker(m.cfg.ObserveEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C():
				m.observe(obs)
			}
		}
	})
	wg.Go(func() {
		t := m.cfg.Clock.NewTicker(m.cfg.SampleEvery)
		defer t.Stop()
		last := m.cfg.Clock.Now()
		for {
			select {
			case <-wctx.Done():
				return
			case now := <-t.C():
				s := m.tracker.Sample(now)
				m.mu.Lock()
				m.samples = append(m.samples, s)
				m.mu.Unlock()
				if now.Sub(last) >= m.cfg.ProgressEvery {
					last = now
					fmt.Fprintf(m.cfg.Log, "%5.0fs: ACKed %.0f MiB, published %.0f MiB, backlog %.1f MiB (%d entries), oldest unpublished %.1fs\n",
						s.Second, mib(s.AckedBytes), mib(s.PublishedBytes), s.BacklogMiB, s.BacklogEntries, s.OldestUnpublishedS)
				}
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// observe reads the table's latest version and, when it is new, hands its
// watermarks to the tracker at the time of the read.
func (m *measurement) observe(o *observer) {
	man, err := o.latest()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.obsErr = err
		return
	}
	if man == nil {
		return
	}
	st, err := publish.ParseState(man.Config)
	if err != nil {
		m.obsErr = err
		return
	}
	m.obsErr = nil
	m.versions++
	m.table = man
	m.tracker.Observed(st.Watermarks, m.cfg.Clock.Now())
}

// drain waits until every ACKed entry is visible (true) or DrainTimeout
// has passed or ctx ended (false).
func (m *measurement) drain(ctx context.Context) bool {
	timeout := m.cfg.Clock.NewTimer(m.cfg.DrainTimeout)
	defer timeout.Stop()
	t := m.cfg.Clock.NewTicker(m.cfg.ObserveEvery)
	defer t.Stop()
	for !m.tracker.AllVisible() {
		select {
		case <-ctx.Done():
			return false
		case <-timeout.C():
			return false
		case <-m.workerDone: // failed at its start
			return false
		case <-t.C():
		}
	}
	return true
}

// finish completes res from what was measured.
func (m *measurement) finish(res *Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	tot := m.tracker.Totals(m.cfg.Clock.Now())
	res.Samples = append(res.Samples, m.samples...)
	res.Versions = m.versions
	res.setTotals(tot)
	res.setBacklog()
	if m.table != nil {
		res.TableVersion, res.TableRows = m.table.Version, int64(m.table.Rows())
	}
	if !res.Drained {
		fmt.Fprintf(m.cfg.Log, "not drained after %s: %d of %d ACKed entries visible\n", m.cfg.DrainTimeout, tot.VisibleEntries, tot.AckedEntries)
		if m.obsErr != nil {
			return fmt.Errorf("reading the benchmark table: %w", m.obsErr)
		}
	}
	return nil
}

// observer reads a table's latest version, reporting each version once.
type observer struct {
	root    string
	ds      *lance.Dataset
	version uint64
}

// latest returns the latest version's manifest when it is newer than the
// last one returned, else nil; a table not created yet is nil too.
func (o *observer) latest() (*lance.Manifest, error) {
	if o.ds == nil {
		ds, err := lance.Open(o.root)
		if errors.Is(err, lance.ErrDatasetNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		o.ds = ds
	}
	v, err := o.ds.LatestVersion()
	if err != nil || v == o.version {
		return nil, err
	}
	man, err := o.ds.Manifest(v)
	if err != nil {
		return nil, err
	}
	o.version = v
	return man, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
