package powerloss

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// A sequence scripts what happens before a power cut. It starts with the
// WAL server serving the surviving tree (checked) and nothing else running,
// and returns, with a description, once the power is to be cut; it may cut
// the power itself before that (h.cut). Every fault it plans
// (h.plan) must fire, or the run fails.
type sequence struct {
	name string
	// compound sequences chain faults before their cut: a kill, a
	// restart with a failpoint, a failed fsync, a cut in recovery, a
	// compaction or clean cut mid-way.
	compound bool
	run      func(h *harness, rng *rand.Rand) string
}

// simple are the sequences of one fault: the cut itself.
var simple = []sequence{
	{"cut at a random moment", false, (*harness).seqRandom},
	{"cut right after an ACK", false, (*harness).seqAfterAck},
	{"cut with the worker at a failpoint", false, (*harness).seqWorkerAt},
	{"cut with a restarted idle wal serve at a failpoint", false, (*harness).seqIdleWALAt},
}

// compound are the sequences that chain faults before their cut.
var compound = []sequence{
	{"kill wal serve under load, restart, publish, cut", true, (*harness).seqKillUnderLoad},
	{"cut, restart paused in recovery, cut", true, (*harness).seqCutInRecovery},
	{"cut, restart with an injected error, take over, cut", true, (*harness).seqErrorOnRestart},
	{"fsync fails in the file system, another process takes over or is refused, cut", true, (*harness).seqFailedSync},
	{"compact paused mid-way, cut", true, (*harness).seqCompact},
	{"clean paused mid-way, cut", true, (*harness).seqClean},
}

// workerPoints are where a cut may find the worker paused: every step of a
// publication round and every durable file-system operation.
var workerPoints = []string{
	failpoint.AfterEpochAdvance, failpoint.AfterPlanPin, failpoint.AfterFilesPrepared,
	failpoint.AfterDescriptorRecord, failpoint.AfterWALEpochCheck, failpoint.BeforeManifestLink,
	failpoint.AfterLinkBeforeDirSync, failpoint.AfterCommitBeforeTrim, failpoint.AfterTrim,
	durable.FailMkdir, durable.FailWrite, durable.FailSync, durable.FailRename, durable.FailLink, durable.FailRemove,
}

// walPoints are the WAL server's durable operations on a registered table,
// in its recovery and under load: fsyncs of entries, seals and directories,
// and the write and rename of its epoch and trim records. (It makes
// directories only when a table is registered, and links and removes only
// when quarantining: a cut planned there would never be reached.)
var walPoints = []string{durable.FailSync, durable.FailWrite, durable.FailRename}

// restartErrors are the errors injected into a WAL server restarted after
// a cut: EIO at an fsync, ENOSPC at a write, EIO at a rename.
var restartErrors = []string{durable.FailSync, durable.FailWrite, durable.FailRename}

// plan counts a planned fault and returns what counts it as fired.
func (h *harness) plan(name string) func(fired bool) bool {
	h.faults.Plan(name)
	return func(fired bool) bool {
		if fired {
			h.faults.Fire(name)
		}
		return fired
	}
}

// load starts the worker (with failpoint spec fp, "" for none) and the
// producers.
func (h *harness) load(fp string) {
	h.startWorker(fp)
	h.startProducers()
}

func (h *harness) seqRandom(rng *rand.Rand) string {
	d := time.Duration(100+rng.IntN(2900)) * time.Millisecond
	h.load("")
	time.Sleep(d)
	return fmt.Sprintf("after %s", d)
}

func (h *harness) seqAfterAck(rng *rand.Rand) string {
	n := 1 + rng.IntN(300)
	h.load("")
	h.plan("cut right after an ACK")(h.prod.waitAcks(n, reachTimeout))
	return fmt.Sprintf("right after ACK %d", n)
}

func (h *harness) seqWorkerAt(rng *rand.Rand) string {
	fp := workerPoints[rng.IntN(len(workerPoints))]
	h.load(fp + "=pause*1")
	h.plan("cut with the worker at " + fp)(h.waitPaused(h.worker, fp))
	return "worker paused at " + fp
}

// seqIdleWALAt kills the idle WAL server and restarts it paused at fp,
// which its recovery or its work after it reaches.
func (h *harness) seqIdleWALAt(rng *rand.Rand) string {
	fp := walPoints[rng.IntN(len(walPoints))]
	fire := h.plan("cut with a restarted idle wal serve at " + fp)
	if h.startWAL(fp+"=pause*1", fp, false) == walPaused {
		fire(true)
		return "wal serve killed, restarted and paused at " + fp + " in its recovery"
	}
	h.load("")
	fire(h.waitPaused(h.srv, fp))
	return "wal serve killed, restarted and paused at " + fp
}

// seqKillUnderLoad: the worker runs (paused at a failpoint half of the
// time) and the producers append; the WAL server is SIGKILLed and
// restarted (half of the time paused at a durable operation on the way,
// then resumed); the worker goes on and publishes; then the power is cut.
func (h *harness) seqKillUnderLoad(rng *rand.Rand) string {
	var desc []string
	wfp, spec := "", ""
	if rng.IntN(2) == 0 {
		wfp = workerPoints[rng.IntN(len(workerPoints))]
		spec = wfp + "=pause*1"
	}
	h.load(spec)
	n := 1 + rng.IntN(200)
	h.plan("ACKs before the kill")(h.prod.waitAcks(n, reachTimeout))
	if wfp != "" && h.plan("worker at "+wfp+" when wal serve is killed")(h.waitPaused(h.worker, wfp)) {
		desc = append(desc, "worker paused at "+wfp)
	}
	before := h.latestVersion()
	h.plan("kill wal serve under load")(!h.srv.Exited())
	h.retire(&h.srv)
	desc = append(desc, fmt.Sprintf("wal serve killed after %d ACKs", n))
	if rng.IntN(2) == 0 {
		// Paused once only: the WAL syncs several files at once, and two
		// goroutines paused at one failpoint would need two resumes.
		fp := walPoints[rng.IntN(len(walPoints))]
		fire := h.plan("wal serve restarted after the kill paused at " + fp)
		st := h.startWAL(fp+"=pause*1", fp, false)
		// The worker goes on: the WAL's records are written for it.
		if wfp != "" {
			h.worker.Resume(wfp)
			wfp = ""
		}
		desc = append(desc, "restarted with a pause at "+fp)
		fire(h.waitPaused(h.srv, fp))
		h.srv.Resume(fp)
		if st != walServes {
			h.awaitWAL("", false)
		}
	} else {
		h.startWAL("", "", false)
		desc = append(desc, "restarted")
	}
	if wfp != "" {
		h.worker.Resume(wfp)
	}
	h.plan("a publication after the restart")(h.waitVersionAbove(before))
	return strings.Join(append(desc, "published"), ", ")
}

// seqCutInRecovery cuts the power under load, restarts the WAL server
// paused at a durable operation — in its recovery, which syncs whatever it
// finds before serving it (rule 22), or else at its first one under load —
// and cuts the power again there.
func (h *harness) seqCutInRecovery(rng *rand.Rand) string {
	h.seqRandom(rng)
	h.cut(rng, "under load, before a restart paused in recovery", false)
	// Its first fsync of a file or of a directory (the point's argument),
	// or its first write or rename of a record.
	fp, spec := durable.FailSync, []string{durable.FailSync + "=pause@0*1", durable.FailSync + "=pause@1*1"}[rng.IntN(2)]
	if rng.IntN(3) == 0 {
		fp = walPoints[rng.IntN(len(walPoints))]
		spec = fp + "=pause*1"
	}
	fire := h.plan("wal serve restarted after a cut paused at " + spec)
	where := "in its recovery"
	if h.startWAL(spec, fp, false) == walServes {
		where = "serving"
		h.load("")
	}
	if fire(h.waitPaused(h.srv, fp)) {
		h.faults.Fire("(of which paused " + where + ")")
	}
	return "wal serve restarted after the cut, paused at " + spec + " " + where
}

// seqErrorOnRestart cuts the power under load and restarts the WAL server
// with an injected I/O error: it fails its recovery and exits, or serves
// and fails a later write; another server then takes over the directory,
// the load goes on, and the power is cut.
func (h *harness) seqErrorOnRestart(rng *rand.Rand) string {
	h.seqRandom(rng)
	h.cut(rng, "under load before a restart with an injected error", false)
	fp := restartErrors[rng.IntN(len(restartErrors))]
	fire := h.plan("wal serve restarted after a cut with an error at " + fp)
	// It may serve with the table stopped by the error (rule 24): no check
	// of what survived is made on it, but on the server that takes over.
	how := "failed in its recovery and served"
	switch st := h.startWAL(fp+"=error*1", "", true); {
	case st == walExited:
		how = "failed in its recovery and exited"
		fire(injected(h.srv))
	case injected(h.srv):
		fire(true)
	default:
		how = "failed while serving"
		h.load("")
		fire(h.waitFor(func() bool { return injected(h.srv) }))
	}
	h.startWAL("", "", false)
	if h.worker == nil {
		h.checkSurvivors(nil)
		h.load("")
	}
	h.plan("ACKs after the takeover")(h.prod.waitAcks(1+rng.IntN(100), reachTimeout))
	return fmt.Sprintf("wal serve restarted with %s=error*1 (%s), another took over", fp, how)
}

// seqFailedSync makes the file system fail an fsync of the WAL server's or
// the worker's files (the dirty data is dropped from durability, the page
// cache keeps it: Linux's semantics); the failed process is replaced by
// another, the load goes on, and the power is cut. A WAL server takes
// over the same files; a worker's failure stops the table for the whole
// fleet (rule 24), so its replacement publishes nothing — the stop is
// lifted after the cut (resumeIfStopped), as an operator would after the
// reboot.
func (h *harness) seqFailedSync(rng *rand.Rand) string {
	victim := []string{"wal", "worker"}[rng.IntN(2)]
	fire := h.plan("fsync failure in the file system under " + victim)
	h.load("")
	h.prod.waitAcks(1+rng.IntN(100), reachTimeout)
	before := h.latestVersion()
	h.fs.FailSync(func(rel string) bool { return strings.HasPrefix(rel, victim+"/") }, 1)
	fire(h.waitFor(func() bool { return h.fs.SyncFailures() > 0 }))
	h.fs.FailSync(nil, 0)
	time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
	if victim == "wal" {
		h.mayExit[h.srv] = true
		h.startWAL("", "", false)
		h.plan("ACKs after the takeover")(h.prod.waitAcks(1+rng.IntN(100), reachTimeout))
		return "an fsync under wal/ failed, another process took over"
	}
	h.plan("the table stopped for the fleet")(h.waitFor(h.stopped))
	h.mayExit[h.worker] = true
	at := h.latestVersion()
	h.startWorker("")
	time.Sleep(2 * time.Second) // ten of the replacement's polls
	h.plan("no publication by the replacement while stopped")(h.stopped() && h.latestVersion() == at)
	return fmt.Sprintf("an fsync under worker/ failed, the table stopped at version %d (latest before the failure %d), the replacement was refused", at, before)
}

// stopped reports whether the table's fleet-wide storage stop is recorded.
func (h *harness) stopped() bool {
	resp, err := h.etcdC.Get(h.ctx, coord.DefaultPrefix+"/stopped/"+table, clientv3.WithCountOnly())
	return err == nil && resp.Count > 0
}

// resumeIfStopped lifts the table's storage stop after a cut (the machine
// rebooted: no page cache survives), with the audited command an operator
// runs.
func (h *harness) resumeIfStopped() {
	h.t.Helper()
	if !h.stopped() {
		return
	}
	r := h.runner.Run(h.t, "resume", nil, "--etcd-endpoints", h.etcd.Endpoint(), "--output", "json",
		"table", "resume", "--table", table, "--reason", "power cycled after a failed fsync")
	if r.Code != 0 {
		h.fail(nil, "table resume: %s", r)
	}
	h.faults.Fire("(stops resumed after the cut)")
}

// compactPoints are where a compaction is cut, with the number of the
// pause: its commit (the second manifest link, after its fence's), or its
// first durable link or fsync.
var compactPoints = []struct {
	fp string
	k  int
}{{failpoint.BeforeManifestLink, 2}, {failpoint.AfterLinkBeforeDirSync, 2}, {durable.FailLink, 1}, {durable.FailSync, 1}}

// seqCompact lets the worker publish a few versions (small fragments), kills
// it, and cuts the power with `table compact` paused mid-way.
func (h *harness) seqCompact(rng *rand.Rand) string {
	p := compactPoints[rng.IntN(len(compactPoints))]
	return h.oneShotCut(rng, 0, fmt.Sprintf("%s=pause*%d", p.fp, p.k), p.fp, p.k, "table", "compact", "--table", table)
}

// seqClean is seqCompact with `table clean --older-than 0s` paused at its
// k-th removal. Clean keeps every version younger than twice the claim TTL
// (rule 23): the load runs that long and more first, so there are old
// versions to remove.
func (h *harness) seqClean(rng *rand.Rand) string {
	h.cleaned = true
	k := 1 + rng.IntN(3)
	return h.oneShotCut(rng, 2*claimTTL+time.Second, fmt.Sprintf("%s=pause*%d", durable.FailRemove, k), durable.FailRemove, k,
		"table", "clean", "--table", table, "--older-than", "0s")
}

// oneShotCut runs the load until a few versions are published and lets
// them age for warm, then runs the one-shot args with failpoint spec, and
// returns once it is paused at its k-th fp.
func (h *harness) oneShotCut(rng *rand.Rand, warm time.Duration, spec, fp string, k int, args ...string) string {
	fire := h.plan(fmt.Sprintf("%s paused at %s", args[1], fp))
	h.load("")
	before := h.latestVersion()
	// Enough new versions that there is something to merge, and more than
	// k versions for a clean to remove (it keeps the latest).
	h.waitFor(func() bool { return h.latestVersion() >= before+uint64(k)+2 })
	if warm > 0 {
		// Let them age, the producers paused (a larger table only makes
		// the run's checks slower).
		h.stopProduction()
		time.Sleep(warm)
		h.startProducers()
	}
	h.retire(&h.worker)
	h.dropClaims()
	h.oneShot = h.walctl(args[1], spec, args...)
	// It may end before its k-th pause (nothing to compact, nothing to
	// remove): then the planned fault did not fire, which fails the run.
	h.mayExit[h.oneShot] = true
	fire(h.pauseNth(h.oneShot, fp, k))
	return fmt.Sprintf("%s paused at its %s #%d under load", strings.Join(args, " "), fp, k)
}

// waitFor waits up to reachTimeout for cond.
func (h *harness) waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(reachTimeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// waitVersionAbove waits for a Lance version above v.
func (h *harness) waitVersionAbove(v uint64) bool {
	return h.waitFor(func() bool { return h.latestVersion() > v })
}

// paused reports whether p is paused at failpoint fp.
func paused(p *proc.Proc, fp string) bool {
	_, err := os.Stat(filepath.Join(p.FailpointDir, fp+".paused"))
	return err == nil
}

// waitPaused waits up to reachTimeout for p to pause at fp; p ending
// meanwhile fails the run unless it may exit.
func (h *harness) waitPaused(p *proc.Proc, fp string) bool {
	return h.waitFor(func() bool {
		if p.Exited() && !paused(p, fp) && !h.mayExit[p] {
			h.fail(nil, "%s exited: %s", p.Name, p.Wait())
		}
		return paused(p, fp)
	})
}

// pauseNth waits for p's k-th pause at fp (spec fp=pause*k), letting the
// earlier ones go on: only for a point that one goroutine passes at a time.
func (h *harness) pauseNth(p *proc.Proc, fp string, k int) bool {
	for i := 1; i <= k; i++ {
		if !h.waitPaused(p, fp) {
			h.t.Logf("%s did not pause at %s #%d of %d within %s; its log ends:\n%s", p.Name, fp, i, k, reachTimeout, tail(p.Stderr(), 20))
			return false
		}
		if i < k {
			if err := os.Remove(filepath.Join(p.FailpointDir, fp+".paused")); err != nil {
				h.t.Fatal(err)
			}
			p.Resume(fp)
		}
	}
	return true
}

// injected reports whether p's log shows an injected fault.
func injected(p *proc.Proc) bool { return strings.Contains(p.Stderr(), "injected error") }

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
