package powerloss

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/powerfs"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// Settings of a run, from the environment (make powerloss sets them).
const (
	EnvCuts       = "WALCTL_POWERLOSS_CUTS"         // power cuts in all (default 3)
	EnvCutsPerRun = "WALCTL_POWERLOSS_CUTS_PER_RUN" // cuts before a run's final check (default 10)
	EnvSeed       = "WALCTL_POWERLOSS_SEED"         // seed of the first run (default: the time)
)

// workerPoints are where a cut may find the worker paused: every step of a
// publication round and every durable file-system operation.
var workerPoints = []string{
	failpoint.AfterEpochAdvance, failpoint.AfterPlanPin, failpoint.AfterFilesPrepared,
	failpoint.AfterDescriptorRecord, failpoint.AfterWALEpochCheck, failpoint.BeforeManifestLink,
	failpoint.AfterLinkBeforeDirSync, failpoint.AfterCommitBeforeTrim, failpoint.AfterTrim,
	durable.FailMkdir, durable.FailWrite, durable.FailSync, durable.FailRename, durable.FailLink, durable.FailRemove,
}

// walPoints are the WAL server's durable operations (in its recovery and
// after it).
var walPoints = []string{durable.FailMkdir, durable.FailWrite, durable.FailSync, durable.FailRename, durable.FailLink, durable.FailRemove}

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

func TestPowerLoss(t *testing.T) {
	cuts := envInt(t, EnvCuts, 3)
	perRun := max(1, envInt(t, EnvCutsPerRun, 10))
	seed := uint64(envInt(t, EnvSeed, time.Now().UnixNano()%1_000_000))
	start := time.Now()
	tally := map[string]int{}
	defer func() { t.Logf("cuts by point:\n%s", formatTally(tally)) }()
	for run, done := 0, int64(0); done < cuts; run++ {
		n := min(perRun, cuts-done)
		s := seed + uint64(run)
		if !t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { powerLossRun(t, s, int(n), tally) }) {
			t.Fatalf("replay with %s=%d %s=%d %s=%d", EnvSeed, s, EnvCuts, n, EnvCutsPerRun, n)
		}
		done += n
	}
	t.Logf("%d power cuts in %s", cuts, time.Since(start).Round(time.Second))
}

// powerLossRun runs producers, a WAL server and a worker over a power-loss
// mount, cuts the power cuts times, and checks the outcome.
// tally counts the cuts by point (and torn ones).
func powerLossRun(t *testing.T, seed uint64, cuts int, tally map[string]int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cuts)*time.Minute+5*time.Minute)
	defer cancel()
	h := newHarness(t, ctx, seed)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	h.startWAL("", nil)
	h.createTable()
	var loss *powerfs.Loss
	for c := 1; c <= cuts; c++ {
		kind, mode := h.cutAt(rng)
		tally[kind]++
		// Half the cuts are torn: part of the unsynced writes reach the disk.
		var tear *rand.Rand
		if rng.IntN(2) == 0 {
			tear = rand.New(rand.NewPCG(seed, uint64(c)))
			mode += " (torn)"
			tally["torn"]++
		}
		loss = h.powerCut(tear)
		h.history = append(h.history, fmt.Sprintf("cut %d: %s; acked=%d; lost %d names, revived %d, rolled back %d files%s",
			c, mode, h.led.acked.Len(), len(loss.Vanished), len(loss.Revived), len(loss.RolledBack), brief(loss)))
		t.Log(h.history[len(h.history)-1])
		h.startWAL("", loss)
		h.checkSurvivors(loss)
	}
	h.finish(loss)
}

func formatTally(tally map[string]int) string {
	var lines []string
	for k, n := range tally {
		lines = append(lines, fmt.Sprintf("  %4d  %s", n, k))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// brief lists a few paths of a loss for the history.
func brief(l *powerfs.Loss) string {
	lines := l.Lines(3)
	if len(lines) == 0 {
		return ""
	}
	return "\n      " + strings.Join(lines, "\n      ")
}

// cutAt starts the worker and the producers and returns once the power is
// to be cut, with the kind of point it chose and its description.
func (h *harness) cutAt(rng *rand.Rand) (kind, desc string) {
	h.t.Helper()
	switch k := rng.IntN(10); {
	case k < 1: // the WAL server crashed and paused at a durable operation
		return h.cutWALAt(walPoints[rng.IntN(len(walPoints))])
	case k < 3: // a random moment
		d := time.Duration(100+rng.IntN(2900)) * time.Millisecond
		h.startWorker("")
		h.startProducers()
		time.Sleep(d)
		return "random moment", fmt.Sprintf("after %s", d)
	case k < 5: // right after the n-th ACK
		n := 1 + rng.IntN(300)
		reached := make(chan struct{})
		var once sync.Once
		var count int
		var mu sync.Mutex
		h.led.onAck(func() {
			mu.Lock()
			defer mu.Unlock()
			if count++; count == n {
				once.Do(func() { close(reached) })
			}
		})
		h.startWorker("")
		h.startProducers()
		select {
		case <-reached:
			return "right after an ACK", fmt.Sprintf("right after ACK %d", n)
		case <-time.After(reachTimeout):
			return "right after an ACK (not reached)", fmt.Sprintf("ACK %d not reached in %s", n, reachTimeout)
		}
	default: // the worker paused at a failpoint
		fp := workerPoints[rng.IntN(len(workerPoints))]
		h.startWorker(fp)
		h.startProducers()
		if h.waitPaused(h.worker, fp) {
			return "worker at " + fp, "worker paused at " + fp
		}
		return "worker at " + fp + " (not reached)", fp + " not reached in " + reachTimeout.String()
	}
}

// cutWALAt kills the WAL server and restarts it with a pause at fp, which
// its recovery or its work after it reaches (or not, within reachTimeout).
func (h *harness) cutWALAt(fp string) (kind, desc string) {
	h.t.Helper()
	h.srv.Kill()
	h.cli.Close()
	if h.startWAL(fp, nil) != "" {
		return "wal serve at " + fp + " in recovery", "wal serve killed, restarted and paused at " + fp + " in its recovery"
	}
	h.startWorker("")
	h.startProducers()
	if h.waitPaused(h.srv, fp) {
		return "wal serve at " + fp, "wal serve killed, restarted and paused at " + fp
	}
	return "wal serve at " + fp + " (not reached)", "wal serve killed, restarted; " + fp + " not reached in " + reachTimeout.String()
}

// waitPaused waits up to reachTimeout for p to pause at fp.
func (h *harness) waitPaused(p *proc.Proc, fp string) bool {
	path := filepath.Join(p.FailpointDir, fp+".paused")
	for deadline := time.Now().Add(reachTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if p.Exited() {
			h.fail(nil, "%s exited: %s", p.Name, p.Wait())
		}
	}
	return false
}

// finish lets publication complete on the surviving tree and checks every
// ACKed id is in the table exactly once (official LanceDB reader and walctl
// verify) and no un-ACKed append is half visible.
func (h *harness) finish(loss *powerfs.Loss) {
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
	ids, err := exactlyonce.OracleIDs(h.ctx, filepath.Join(h.lanceRoot(), table+".lance"))
	if err != nil {
		h.fail(loss, "official reader: %v", err)
	}
	rep := exactlyonce.Check(ids, h.led.acked.Snapshot())
	if len(rep.Missing) > 0 || len(rep.Duplicated) > 0 {
		h.fail(loss, "official reader: %v", rep.Err())
	}
	for _, id := range rep.Unacked {
		if !h.led.isUncertain(id) {
			h.fail(loss, "official reader: id %d was never appended", id)
		}
	}
	if err := h.led.checkHalfVisible(exactlyonce.Count(ids)); err != nil {
		h.fail(loss, "official reader: %v", err)
	}
	r := h.runner.Run(h.t, "verify", nil, "--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.cli.Addr(), "--data-dir", h.workerDir(), "--output", "json", "verify", "--table", table)
	if r.Code != 0 || !strings.Contains(r.Stdout, `"ok": true`) {
		h.fail(loss, "walctl verify: %s", r)
	}
	h.t.Logf("seed=%d cuts=%d acked=%d uncertain-in-table=%d rows=%d lost=0 duplicated=0", h.seed, len(h.history), rep.Acked, len(rep.Unacked), rep.Rows)
}
