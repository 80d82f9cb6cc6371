package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
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
	// oracleVersions is how many versions of each table the official
	// reader re-reads (-1: all; exactlyonce.EnvOracleVersions).
	oracleVersions int
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
	var err error
	if c.oracleVersions, err = exactlyonce.OracleVersionsFromEnv(); err != nil {
		t.Fatal(err)
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
	faults                  *exactlyonce.Faults
	acked, lost, duplicated int
	invented, uncertainSeen int
	unverified              int // ACKed ids of tables the official reader could not read
	versions, oracleVersion int // Lance versions audited; re-read by the official reader
	commits                 int // logged commits checked against their versions
	resumes                 int // storage stops the operator lifted
	catchups                int // catch-up executors the master started
	compactions, cleaned    int // compaction groups committed; versions cleaned away
	revokes                 int // claims revoked to make room for a one-shot
	wall                    time.Duration
}

func (o *outcome) add(p outcome) {
	o.faults.Add(p.faults)
	o.acked += p.acked
	o.lost += p.lost
	o.duplicated += p.duplicated
	o.invented += p.invented
	o.uncertainSeen += p.uncertainSeen
	o.unverified += p.unverified
	o.versions += p.versions
	o.oracleVersion += p.oracleVersion
	o.commits += p.commits
	o.resumes += p.resumes
	o.catchups += p.catchups
	o.compactions += p.compactions
	o.cleaned += p.cleaned
	o.revokes += p.revokes
}

func (o outcome) String() string {
	return fmt.Sprintf("faults=%d catchups=%d compactions=%d versions-cleaned=%d claims-revoked=%d stops-resumed=%d acked=%d lost=%d duplicated=%d never-appended=%d unknown-published=%d unverified=%d versions-audited=%d commits-audited=%d official-reader-versions=%d",
		o.faults.Planned(), o.catchups, o.compactions, o.cleaned, o.revokes, o.resumes, o.acked, o.lost, o.duplicated, o.invented, o.uncertainSeen, o.unverified, o.versions, o.commits, o.oracleVersion)
}

// TestChaos runs seeded fault schedules against the real processes and
// prints one line per run and the tally of planned faults and of those
// that fired; a failed run prints its seed and schedule.
func TestChaos(t *testing.T) {
	cfg := configFromEnv(t)
	start := time.Now()
	var mu sync.Mutex
	total := outcome{faults: exactlyonce.NewFaults()}
	failed := 0
	for i := 0; i < cfg.runs; i++ {
		seed := cfg.seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			o := runOnce(t, cfg, seed)
			mu.Lock()
			defer mu.Unlock()
			total.add(o)
			if t.Failed() {
				failed++
			}
		})
	}
	fmt.Printf("chaos: runs=%d failed=%d %s wall=%s\nplanned faults and how many fired:\n%s",
		cfg.runs, failed, total, time.Since(start).Round(time.Second), total.faults)
}

// runOnce is one run: start the system and the load, inject the schedule,
// end every fault, let everything be published, check.
func runOnce(t *testing.T, cfg config, seed uint64) (o outcome) {
	start := time.Now()
	sched := schedule(seed, cfg.phase, cfg.faults, cfg.workers, cfg.exclude)
	o = outcome{seed: seed, faults: exactlyonce.NewFaults()}
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
	orc, err := oracle.Find()
	if err != nil {
		t.Fatal(err)
	}
	s = newSystem(t, ctx, cfg.workers)
	s.faults = o.faults
	for _, f := range sched {
		s.faults.Plan(f.tally())
	}
	l, err := startLoad(ctx, s, seed)
	if err != nil {
		t.Fatal(err)
	}
	defer l.cli.Close()
	due, err := s.execute(sched, cfg.phase)
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
	histories := map[string]*exactlyonce.History{}
	for _, table := range tables {
		histories[table] = exactlyonce.NewHistory()
	}
	problems := append(slices.Clone(s.problems), s.observeVersions(histories)...)
	if err := l.finish(); err != nil {
		t.Fatal(err)
	}
	if err := s.sealAll(l); err != nil {
		t.Fatal(err)
	}
	if behind := s.waitPublished(l, 60*time.Second); len(behind) > 0 {
		problems = append(problems, fmt.Sprintf("liveness: %v not fully published 60 s after the faults ended, nor by walctl publish --all", behind))
	}
	for _, table := range tables {
		c := s.check(table, l.tables[table], histories[table], orc, cfg.oracleVersions)
		o.acked += c.acked
		o.lost += c.lost
		o.duplicated += c.duplicated
		o.invented += c.invented
		o.uncertainSeen += c.uncertainSeen
		o.versions += c.versions
		o.oracleVersion += c.oracleVersions
		o.commits += c.commits
		if c.unverified {
			o.unverified += c.acked
		}
		for _, p := range c.problems {
			problems = append(problems, table+": "+p)
		}
	}
	problems = append(problems, s.crashes()...)
	if err := s.faults.Err(); err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range problems {
		t.Error(p)
	}
	o.wall = time.Since(start)
	o.catchups, o.compactions, o.cleaned, o.revokes, o.resumes = s.catchups(), s.compactions, s.versionsRemoved, s.revokes, s.resumes
	fmt.Printf("seed=%d %s executor-faults-without-executor=%d wall=%s\n", seed, o, s.execMissed, o.wall.Round(100*time.Millisecond))
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
	for i, o := range s.oneShots {
		<-o.done
		var logs []string
		for _, r := range o.results {
			logs = append(logs, r.String())
		}
		name := fmt.Sprintf("%s-%d-%s.stderr", o.f.Kind, i, o.f.Target)
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(strings.Join(logs, "\n==== again ====\n")), 0o644); err != nil {
			t.Log(err)
		}
	}
	fmt.Printf("seed=%d logs, WAL and tables: %s\n", seed, s.dir)
}

// catchups counts the executors the master's local runner started (one log
// each).
func (s *system) catchups() int { return len(s.executorLogs()) }

// executorLogs are the logs of the executors the master's local runner
// started.
func (s *system) executorLogs() []string {
	logs, _ := filepath.Glob(filepath.Join(s.procDir("master"), "master", "jobs", "*.log"))
	return logs
}
