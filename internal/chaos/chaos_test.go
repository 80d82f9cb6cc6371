package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment of the harness (the Makefile's chaos target sets them).
const (
	EnvRuns    = "WALCTL_CHAOS_RUNS"    // number of runs (default 3; 1 with a seed)
	EnvSeed    = "WALCTL_CHAOS_SEED"    // seed of the first run (default: from the clock)
	EnvExclude = "WALCTL_CHAOS_EXCLUDE" // fault kinds left out, comma separated
	EnvLogs    = "WALCTL_CHAOS_LOGS"    // where a failed run's logs are kept (default: a temp dir)
)

// config of a series of runs.
type config struct {
	runs    int
	seed    uint64
	exclude []string
	phase   time.Duration // how long faults are injected while the load runs
	faults  int           // faults per run
	workers int
}

func configFromEnv(t *testing.T) config {
	c := config{runs: 3, seed: uint64(time.Now().UnixNano() % 1_000_000), phase: 10 * time.Second, faults: 8, workers: 3}
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, s, err)
		}
		c.seed, c.runs = v, 1
	}
	if s := os.Getenv(EnvRuns); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive number", EnvRuns, s)
		}
		c.runs = v
	}
	for _, k := range strings.Split(os.Getenv(EnvExclude), ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !contains(Kinds, k) {
			t.Fatalf("%s: unknown fault kind %q (kinds: %s)", EnvExclude, k, strings.Join(Kinds, ", "))
		}
		c.exclude = append(c.exclude, k)
	}
	return c
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// outcome is one run's figures.
type outcome struct {
	seed                    uint64
	faults                  map[string]int
	fired                   int // injected I/O errors that the process reported
	acked, lost, duplicated int
	invented, unknownSeen   int
	unverified              int // ACKed ids of tables the official reader could not read
	catchups                int // catch-up executors the master started
	execMissed              int // executor faults that found none running
	wall                    time.Duration
}

// TestChaos runs seeded fault schedules against the real processes and
// prints one line per run; a failed run prints its seed and schedule.
func TestChaos(t *testing.T) {
	cfg := configFromEnv(t)
	start := time.Now()
	var mu sync.Mutex
	total := outcome{faults: map[string]int{}}
	failed := 0
	for i := 0; i < cfg.runs; i++ {
		seed := cfg.seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			o := runOnce(t, cfg, seed)
			mu.Lock()
			defer mu.Unlock()
			for k, n := range o.faults {
				total.faults[k] += n
			}
			total.fired += o.fired
			total.catchups += o.catchups
			total.execMissed += o.execMissed
			total.acked += o.acked
			total.lost += o.lost
			total.duplicated += o.duplicated
			total.invented += o.invented
			total.unverified += o.unverified
			if t.Failed() {
				failed++
			}
		})
	}
	fmt.Printf("chaos: runs=%d failed=%d faults=%d (%s) io-fired=%d executor-faults-without-executor=%d catchups=%d acked=%d lost=%d duplicated=%d never-appended=%d unverified=%d wall=%s\n",
		cfg.runs, failed, sum(total.faults), breakdown(total.faults), total.fired, total.execMissed, total.catchups, total.acked, total.lost, total.duplicated,
		total.invented, total.unverified, time.Since(start).Round(time.Second))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func breakdown(m map[string]int) string {
	var parts []string
	for _, k := range Kinds {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	return strings.Join(parts, " ")
}

// runOnce is one run: start the system and the load, inject the schedule,
// end every fault, let everything be published, check.
func runOnce(t *testing.T, cfg config, seed uint64) (o outcome) {
	start := time.Now()
	sched := schedule(seed, cfg.phase, cfg.faults, cfg.workers, cfg.exclude)
	o = outcome{seed: seed, faults: map[string]int{}}
	for _, f := range sched {
		o.faults[f.Kind]++
	}
	t.Logf("schedule of seed %d:\n%s", seed, formatSchedule(sched))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var s *system
	defer func() {
		if t.Failed() {
			fmt.Printf("seed=%d FAILED after %s; replay: make chaos SEED=%d\nschedule:\n%s", seed,
				time.Since(start).Round(time.Millisecond), seed, formatSchedule(sched))
			if s != nil {
				s.keepLogs(t, seed)
			}
		}
	}()
	s = newSystem(t, ctx, cfg.workers)
	l, err := startLoad(ctx, s, seed)
	if err != nil {
		t.Fatal(err)
	}
	defer l.cli.Close()
	pubs, due, err := s.execute(sched, cfg.phase)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := s.quiesce(due)
	for _, n := range notes {
		t.Log(n)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := l.finish(); err != nil {
		t.Fatal(err)
	}
	if err := s.sealAll(l); err != nil {
		t.Fatal(err)
	}
	if behind := s.waitPublished(l, 60*time.Second); len(behind) > 0 {
		t.Errorf("liveness: %v not fully published 60 s after the faults ended, nor by walctl publish --all", behind)
	}
	for _, p := range pubs {
		r := p.Wait()
		if r.Code == 6 || (r.Code != 0 && r.Code != 4 && r.Code != 5 && r.Code != 130 && r.Signal == 0) {
			t.Errorf("one-shot %s (%s): %s", p.Name, strings.Join(p.Args, " "), r)
		}
	}
	for _, m := range s.members {
		o.fired += m.fired
	}
	unknown := 0
	for _, table := range tables {
		c := s.check(table, l.tables[table])
		o.acked += c.acked
		o.lost += c.lost
		o.duplicated += c.duplicated
		o.invented += len(c.invented)
		unknown += c.unknownSeen
		if c.unverified {
			o.unverified += c.acked
		}
		for _, p := range c.problems {
			t.Errorf("%s: %s", table, p)
		}
	}
	o.wall = time.Since(start)
	o.catchups, o.execMissed = s.catchups(), s.execMissed
	fmt.Printf("seed=%d faults=%d (%s) io-fired=%d executor-faults-without-executor=%d catchups=%d acked=%d lost=%d duplicated=%d never-appended=%d unverified=%d unknown-published=%d wall=%s\n",
		seed, len(sched), breakdown(o.faults), o.fired, o.execMissed, o.catchups, o.acked, o.lost, o.duplicated, o.invented, o.unverified, unknown, o.wall.Round(100*time.Millisecond))
	return o
}

// keepLogs writes every process's output of a failed run into the run's
// directory (kept when a run fails) and says where.
func (s *system) keepLogs(t *testing.T, seed uint64) {
	for name, m := range s.members {
		if m.p == nil {
			continue
		}
		logs := strings.Join(append(m.logs, m.p.Stderr()), "\n==== restarted ====\n")
		if err := os.WriteFile(filepath.Join(s.dir, name+".stderr"), []byte(logs), 0o644); err != nil {
			t.Log(err)
		}
	}
	fmt.Printf("seed=%d logs, WAL and tables: %s\n", seed, s.dir)
}

// catchups counts the executors the master's local runner started (one log
// each).
func (s *system) catchups() int {
	logs, _ := filepath.Glob(filepath.Join(s.procDir("master"), "master", "jobs", "*.log"))
	return len(logs)
}
