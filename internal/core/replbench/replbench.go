// Package replbench measures the replicated WAL (`walctl bench wal
// --replicas N`): N `wal serve` replica processes of one group on this disk,
// appended to through the group client, beside the single-directory engine
// and dd conv=fdatasync in the same run. Per producer count it reports ACKed
// MiB/s, p50/p99 ACK latency, the bytes each replica process wrote per ACKed
// byte (/proc/<pid>/io write_bytes) and the disk efficiency: ACKed MiB/s ×
// replicas ÷ dd MiB/s (how much of the disk's bandwidth the replicas turn
// into replicated, ACKed data).
package replbench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/wal/walbench"
	"github.com/walctl/walctl/internal/core/walflight"
)

// Config describes a replicated benchmark.
type Config struct {
	walbench.Config
	// Exe is the walctl binary the replicas run (`wal serve`).
	Exe string
	// Replicas is the group's size (default 3).
	Replicas int
	// CPUProfile, when set, has each replica write a CPU profile of its
	// run to CPUProfile.p<producers>.r<replica> (go tool pprof reads it).
	CPUProfile string
}

// Run is one producer count in one mode.
type Run struct {
	walbench.RunResult
	// Mode is "single-directory" or "replicated".
	Mode string `json:"mode"`
	// WriteAmp is, per replica process, bytes written to disk per ACKed
	// byte (replicated mode).
	WriteAmp []float64 `json:"write_amplification,omitempty"`
	// DiskEfficiency is MiBps × replicas ÷ DDMiBps (1 replica for the
	// single-directory engine).
	DiskEfficiency float64 `json:"disk_efficiency"`
}

// Result is what Run measured.
type Result struct {
	Replicas   int                 `json:"replicas"`
	EntryBytes int                 `json:"entry_bytes"`
	DDs        []walbench.DDResult `json:"dd_runs"`
	Runs       []Run               `json:"runs"`
}

// Measure runs, for each producer count, the single-directory engine and
// then the replicated group, each between two dd measurements
// (walbench.Bracket). Scratch directories and replica processes are
// removed and stopped either way; cancelling ctx stops the measurement.
func Measure(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 3
	}
	if cfg.Dir == "" || cfg.Exe == "" {
		return Result{}, fmt.Errorf("benchmark directory and walctl binary needed: %w", errs.ErrInvalid)
	}
	single, err := walbench.Run(ctx, cfg.Config) // fills the defaults and measures the engine
	if err != nil {
		return Result{}, err
	}
	res := Result{Replicas: cfg.Replicas, EntryBytes: single.EntryBytes, DDs: single.DDs}
	for _, r := range single.Runs {
		res.Runs = append(res.Runs, Run{RunResult: r, Mode: "single-directory", DiskEfficiency: r.Ratio})
	}
	producers := cfg.Producers
	if len(producers) == 0 {
		producers = []int{1, 4, 16}
	}
	var repl []Run
	dds, err := walbench.Bracket(ctx, cfg.Dir, single.DD.MiB, len(producers), func(i int) error {
		r, err := runReplicated(ctx, cfg, single.EntryBytes, producers[i])
		repl = append(repl, r)
		return err
	})
	if err != nil {
		return res, err
	}
	res.DDs = append(res.DDs, dds...)
	for i := range repl {
		repl[i].DDMiBps = walbench.Around(dds, i)
		repl[i].Ratio = repl[i].MiBps / repl[i].DDMiBps
		repl[i].DiskEfficiency = repl[i].Ratio * float64(cfg.Replicas)
	}
	res.Runs = append(res.Runs, repl...)
	return res, nil
}

// replica is one `wal serve` child process.
type replica struct {
	cmd        *exec.Cmd
	addr, peer string
	ready      chan struct{}
	exited     chan struct{} // its stderr closed: it ended
	stderr     strings.Builder
	mu         sync.Mutex
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs `wal serve` for replica i of the group and returns once it
// logs that it serves (its stderr is watched, no polling).
func start(ctx context.Context, cfg Config, dir string, i, producers int, genBytes int64) (*replica, error) {
	r := &replica{ready: make(chan struct{}), exited: make(chan struct{})}
	var err error
	if r.addr, err = freeAddr(); err != nil {
		return nil, err
	}
	if r.peer, err = freeAddr(); err != nil {
		return nil, err
	}
	name := "r" + strconv.Itoa(i)
	args := []string{"wal", "serve", "--dir", filepath.Join(dir, name), "--listen", r.addr, "--addr-file", filepath.Join(dir, name+".addr"),
		"--group", "bench", "--name", name, "--peer-listen", r.peer, "--wal-generation-bytes", strconv.FormatInt(genBytes, 10)}
	if i == 0 {
		args = append(args, "--bootstrap")
	}
	if cfg.CPUProfile != "" {
		args = append(args, "--cpuprofile", fmt.Sprintf("%s.p%d.r%d", cfg.CPUProfile, producers, i))
	}
	r.cmd = exec.Command(cfg.Exe, args...)
	r.cmd.Env = append(os.Environ(), "WALCTL_DATA_DIR="+dir, "WALCTL_LOG_LEVEL=info")
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start replica %s: %w", name, err)
	}
	go r.watch(pipe)
	select {
	case <-r.ready:
		return r, nil
	case <-r.exited:
		r.stop()
		return nil, fmt.Errorf("replica %s ended before serving: %w (stderr: %s)", name, errs.ErrUnavailable, r.log())
	case <-ctx.Done():
		r.stop()
		return nil, fmt.Errorf("replica %s did not start: %w: %w (stderr: %s)", name, ctx.Err(), errs.ErrUnavailable, r.log())
	}
}

func (r *replica) watch(pipe io.Reader) {
	defer close(r.exited)
	sc := bufio.NewScanner(pipe)
	once := sync.Once{}
	for sc.Scan() {
		r.mu.Lock()
		r.stderr.WriteString(sc.Text() + "\n")
		r.mu.Unlock()
		if strings.Contains(sc.Text(), "walflight: serving WAL") {
			once.Do(func() { close(r.ready) })
		}
	}
}

func (r *replica) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

func (r *replica) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
}

// writeBytes reads write_bytes from /proc/<pid>/io.
func (r *replica) writeBytes() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", r.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/io has no write_bytes", r.cmd.Process.Pid)
}

// group starts the replicas and forms the group (the others added by the
// leader, caught up and promoted).
func group(ctx context.Context, cfg Config, dir string, producers int) ([]*replica, *walflight.GroupClient, error) {
	var reps []*replica
	var addrs []string
	for i := 0; i < cfg.Replicas; i++ {
		gen := cfg.Engine.MaxGenerationBytes
		if gen <= 0 {
			gen = wal.DefaultMaxGenerationBytes
		}
		r, err := start(ctx, cfg, dir, i, producers, gen)
		if err != nil {
			return reps, nil, err
		}
		reps = append(reps, r)
		addrs = append(addrs, r.addr)
	}
	c, err := walflight.NewGroupClient("bench", addrs, walflight.ClientOptions{CallTimeout: time.Minute})
	if err != nil {
		return reps, nil, err
	}
	for _, r := range reps[1:] {
		if err := c.AddReplica(ctx, "", r.peer); err != nil {
			return reps, c, fmt.Errorf("form the benchmark group: %w", err)
		}
	}
	return reps, c, nil
}

// runReplicated measures one producer count against a fresh group.
func runReplicated(ctx context.Context, cfg Config, entry, producers int) (Run, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "replbench-")
	if err != nil {
		return Run{}, err
	}
	defer os.RemoveAll(dir)
	reps, c, err := group(ctx, cfg, dir, producers)
	defer func() {
		if c != nil {
			c.Close()
		}
		for _, r := range reps {
			r.stop()
		}
	}()
	if err != nil {
		return Run{}, err
	}
	if _, err := c.CreateTable(ctx, "bench", walbench.Schema(), 1); err != nil {
		return Run{}, err
	}
	recs := make([]interface{ Release() }, 0, producers)
	run := Run{Mode: "replicated", RunResult: walbench.RunResult{Producers: producers, Trimmed: !cfg.NoTrim}}
	before := make([]int64, len(reps))
	for i, r := range reps {
		if before[i], err = r.writeBytes(); err != nil {
			return run, err
		}
	}
	stopTrim := func() error { return nil }
	if !cfg.NoTrim {
		stopTrim = walbench.TrimSealed(ctx, c)
	}
	lat, w, err := produce(ctx, c, cfg, entry, producers, &recs)
	if terr := stopTrim(); err == nil {
		err = terr
	}
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return run, err
	}
	if err := caughtUp(ctx, c); err != nil {
		return run, err
	}
	slices.Sort(lat)
	run.Appends, run.Bytes, run.Seconds = int64(len(lat)), int64(len(lat))*int64(entry), w.Seconds
	run.Load = w.Load
	run.MiBps = float64(run.Bytes) / (1 << 20) / w.Seconds
	run.P50Ms, run.P99Ms = walbench.Latencies(lat)
	for i, r := range reps {
		after, err := r.writeBytes()
		if err != nil {
			return run, err
		}
		run.WriteAmp = append(run.WriteAmp, float64(after-before[i])/float64(run.Bytes))
	}
	return run, nil
}

// caughtUp waits (ticking, within a minute) until every replica has applied
// what the leader logged, so that each one's write_bytes counts the whole
// run: a quorum ACKs, the third may trail.
func caughtUp(ctx context.Context, c *walflight.GroupClient) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ms, err := c.Members(ctx)
		behind := err != nil
		for _, m := range ms {
			behind = behind || m.Lag > 0 || m.Error != ""
		}
		if !behind {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replicas did not catch up after the run (%+v, %v): %w", ms, err, errs.ErrUnavailable)
		case <-tick.C:
		}
	}
}

// produce appends from producers goroutines until the byte budget or the
// time limit (walbench.Drive), returning every ACK latency.
func produce(ctx context.Context, c *walflight.GroupClient, cfg Config, entry, producers int, recs *[]interface{ Release() }) ([]time.Duration, walbench.Window, error) {
	batches := make([]arrow.RecordBatch, producers)
	for p := range batches {
		batches[p] = walbench.Record(entry)
		*recs = append(*recs, batches[p])
	}
	budget, limit := cmp.Or(cfg.BytesPerRun, 512<<20), cmp.Or(cfg.MaxDuration, 10*time.Second)
	return walbench.Drive(ctx, batches, budget, entry, limit, func(ctx context.Context, rec arrow.RecordBatch) error {
		_, err := c.Append(ctx, "bench", 0, rec)
		return err
	})
}
