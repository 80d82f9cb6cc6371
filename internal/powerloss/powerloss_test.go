package powerloss

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/powerfs"
)

// Settings of a run, from the environment (make powerloss sets them).
const (
	EnvCuts       = "WALCTL_POWERLOSS_CUTS"         // power cuts in all (default 3)
	EnvCutsPerRun = "WALCTL_POWERLOSS_CUTS_PER_RUN" // cuts before a run's final check (default 10)
	EnvSeed       = "WALCTL_POWERLOSS_SEED"         // seed of the first run (default: the time)
	// EnvCompound is the share, in percent, of the sequences before a cut
	// that chain faults (default 60; 0 for simple cuts only, 100 for
	// compound ones only).
	EnvCompound = "WALCTL_POWERLOSS_COMPOUND"
	// EnvSequences keeps only the sequences whose name contains one of
	// these comma-separated words (e.g. "fsync,recovery"), to hunt one bug.
	EnvSequences = "WALCTL_POWERLOSS_SEQUENCES"
)

// sequencesFromEnv are the simple and compound sequences EnvSequences
// keeps (all without it).
func sequencesFromEnv(t *testing.T) (simpleSeqs, compoundSeqs []sequence) {
	words := strings.Split(os.Getenv(EnvSequences), ",")
	keep := func(seqs []sequence) []sequence {
		var out []sequence
		for _, s := range seqs {
			if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s.name, strings.TrimSpace(w)) }) {
				out = append(out, s)
			}
		}
		return out
	}
	simpleSeqs, compoundSeqs = keep(simple), keep(compound)
	if len(simpleSeqs)+len(compoundSeqs) == 0 {
		t.Fatalf("%s=%q keeps no sequence", EnvSequences, os.Getenv(EnvSequences))
	}
	return simpleSeqs, compoundSeqs
}

func envInt(t *testing.T, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return n
}

// tally is what the runs of a test did.
type tally struct {
	simple, compound int
	faults           *exactlyonce.Faults
}

func TestPowerLoss(t *testing.T) {
	cuts := envInt(t, EnvCuts, 3)
	perRun := max(1, envInt(t, EnvCutsPerRun, 10))
	seed := uint64(envInt(t, EnvSeed, time.Now().UnixNano()%1_000_000))
	share := int(min(100, envInt(t, EnvCompound, 60)))
	simpleSeqs, compoundSeqs := sequencesFromEnv(t)
	oracleVersions, err := exactlyonce.OracleVersionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	all := &tally{faults: exactlyonce.NewFaults()}
	defer func() {
		t.Logf("%d simple and %d compound cuts in %s; planned faults and how many fired:\n%s",
			all.simple, all.compound, time.Since(start).Round(time.Second), all.faults)
	}()
	for run, done := 0, 0; done < int(cuts); run++ {
		n := min(int(perRun), int(cuts)-done)
		s := seed + uint64(run)
		var did int
		if !t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { did = powerLossRun(t, s, n, share, simpleSeqs, compoundSeqs, oracleVersions, all) }) {
			t.Fatalf("replay with %s=%d %s=%d %s=%d %s=%d %s=%q", EnvSeed, s, EnvCuts, n, EnvCutsPerRun, n, EnvCompound, share, EnvSequences, os.Getenv(EnvSequences))
		}
		done += did
	}
}

// powerLossRun runs producers, a WAL server and a worker over a power-loss
// mount, cuts the power at least cuts times, each after a sequence of
// faults (compound: share percent of them), and checks the outcome. It
// returns the number of cuts.
func powerLossRun(t *testing.T, seed uint64, cuts, share int, simpleSeqs, compoundSeqs []sequence, oracleVersions int, all *tally) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cuts)*2*time.Minute+5*time.Minute)
	defer cancel()
	h := newHarness(t, ctx, seed)
	defer func() {
		all.faults.Add(h.faults)
		all.simple += len(h.history) - h.compoundCuts
		all.compound += h.compoundCuts
	}()
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	h.startWAL("", "", false)
	h.createTable()
	var loss *powerfs.Loss
	for len(h.history) < cuts {
		seqs := simpleSeqs
		if rng.IntN(100) < share && len(compoundSeqs) > 0 || len(simpleSeqs) == 0 {
			seqs = compoundSeqs
		}
		seq := seqs[rng.IntN(len(seqs))]
		desc := seq.run(h, rng)
		loss = h.cut(rng, seq.name+": "+desc, seq.compound)
		h.resumeIfStopped()
		h.startWAL("", "", false)
		h.checkSurvivors(loss)
	}
	h.finish(loss, oracleVersions)
	return len(h.history)
}

// cut cuts the power, half of the time torn (part of the unsynced writes
// reach the disk), and records it; the WAL server stays down.
func (h *harness) cut(rng *rand.Rand, desc string, compound bool) *powerfs.Loss {
	var tear *rand.Rand
	if rng.IntN(2) == 0 {
		tear = rand.New(rand.NewPCG(h.seed, uint64(len(h.history))))
		desc += " (torn)"
		h.faults.Fire("(torn cuts)")
	}
	kind := "simple"
	if compound {
		kind = "compound"
		h.compoundCuts++
	}
	loss := h.powerCut(tear)
	h.history = append(h.history, fmt.Sprintf("cut %d (%s): %s; acked=%d; lost %d names, revived %d, rolled back %d files%s",
		len(h.history)+1, kind, desc, h.prod.led.Acked.Len(), len(loss.Vanished), len(loss.Revived), len(loss.RolledBack), brief(loss)))
	h.t.Log(h.history[len(h.history)-1])
	return loss
}

// brief lists a few paths of a loss for the history.
func brief(l *powerfs.Loss) string {
	lines := l.Lines(3)
	if len(lines) == 0 {
		return ""
	}
	return "\n      " + strings.Join(lines, "\n      ")
}

// finish lets publication complete on the surviving tree and checks: every
// ACKed id in the latest version exactly once (official LanceDB reader), no
// refused or never-appended id, no append of unknown outcome half visible;
// every version audited (managed reader, some again with the official one);
// `walctl verify`; every planned fault fired.
func (h *harness) finish(loss *powerfs.Loss, oracleVersions int) {
	h.t.Helper()
	h.startWorker("")
	for s := 0; s < shards; s++ {
		ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
		_, _ = h.cli.Seal(ctx, table, s) // an empty open generation has nothing to seal
		cancel()
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		st, err := h.stats()
		if err != nil {
			h.fail(loss, "stats: %v", err)
		}
		done := true
		for _, s := range st.Shards {
			done = done && s.TrimmedThrough == s.LastPosition
		}
		if done {
			break
		}
		if h.worker.Exited() || time.Now().After(deadline) {
			h.fail(loss, "publication did not finish on the surviving tree (stats %+v); worker:\n%s", st.Shards, h.worker.Stderr())
		}
	}
	if r := h.worker.Terminate(30 * time.Second); r.Code != 0 {
		h.fail(loss, "worker did not stop cleanly: %s", r)
	}
	h.judgeEnd(h.worker, false)
	o, err := oracle.Find()
	if err != nil {
		h.fail(loss, "official reader: %v", err)
	}
	ids, err := exactlyonce.OracleIDsWith(h.ctx, o, h.tablePath())
	if err != nil {
		h.fail(loss, "official reader: %v", err)
	}
	v := h.prod.led.Judge(ids)
	problems := v.Problems()
	vs, audit := h.auditVersions()
	problems = append(problems, audit...)
	problems = append(problems, exactlyonce.CrossCheck(h.ctx, o, h.tablePath(), exactlyonce.PickVersions(vs, oracleVersions))...)
	r := h.runner.Run(h.t, "verify", nil, "--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.walAddr, "--data-dir", h.workerDir(), "--output", "json", "verify", "--table", table)
	if r.Code != 0 || !strings.Contains(r.Stdout, `"ok": true`) {
		problems = append(problems, fmt.Sprintf("walctl verify: %s", r))
	}
	if err := h.faults.Err(); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		h.fail(loss, "at the end of the run:\n  %s\nplanned faults and how many fired:\n%s", strings.Join(problems, "\n  "), h.faults)
	}
	h.t.Logf("seed=%d cuts=%d (compound %d) acked=%d uncertain-in-table=%d rows=%d versions-audited=%d lost=0 duplicated=0",
		h.seed, len(h.history), h.compoundCuts, v.Acked, v.UncertainSeen, v.Rows, len(vs))
}
