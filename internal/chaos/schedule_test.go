package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// Fault kinds. A schedule is a list of faults drawn from a seed; the same
// seed draws the same schedule (the processes' timing still varies).
const (
	KillWorker  = "kill-worker"   // SIGKILL a worker, restart it after the hold
	StopWorker  = "stop-worker"   // SIGSTOP a worker past the claim TTL, then SIGCONT
	KillWAL     = "kill-wal"      // SIGKILL the WAL server, restart it
	StopWAL     = "stop-wal"      // SIGSTOP the WAL server, then SIGCONT
	KillEtcd    = "restart-etcd"  // SIGKILL etcd, restart it on its data dir
	StopEtcd    = "stop-etcd"     // SIGSTOP etcd past the claim TTL, then SIGCONT
	KillMaster  = "kill-master"   // SIGKILL the master (its executors live on), restart it
	StopMaster  = "stop-master"   // SIGSTOP the master, then SIGCONT
	KillExec    = "kill-executor" // SIGKILL a running `catchup run` executor, if any
	StopExec    = "stop-executor" // SIGSTOP it past the claim TTL, then SIGCONT
	IOWorker    = "io-worker"     // restart a worker with an injected I/O or publication error
	FsyncWorker = "fsync-worker"  // restart a worker whose next fsync fails: the table stops for the fleet until resumed
	IOWAL       = "io-wal"        // restart the WAL server with an injected I/O error
	Publish     = "publish"       // a one-shot `walctl publish` racing the workers
	PublishKill = "publish-kill"  // the same, SIGKILLed at a publication point
	Compact     = "compact"       // a one-shot `walctl table compact` racing the workers
	CompactKill = "compact-kill"  // the same, SIGKILLed at a commit or durable point
	Clean       = "clean"         // a one-shot `walctl table clean --older-than D`
	CleanKill   = "clean-kill"    // the same, SIGKILLed at its first removal
)

// Kinds are every fault kind, in the order the summary lists them.
var Kinds = []string{KillWorker, StopWorker, KillWAL, StopWAL, KillEtcd, StopEtcd, KillMaster, StopMaster,
	KillExec, StopExec, IOWorker, FsyncWorker, IOWAL, Publish, PublishKill, Compact, CompactKill, Clean, CleanKill}

// oneShots are the kinds run as a one-shot command beside the daemons.
var oneShots = []string{Publish, PublishKill, Compact, CompactKill, Clean, CleanKill}

// workerFailpoints are the injected errors of io-worker: EIO/ENOSPC at the
// durable sites, and errors at the publication points (before the link, an
// unknown outcome after it, before the trim, mid-preparation). The unknown
// outcome is injected twice: a fence's, the first link of a claim, is
// resolved by re-reading without a word in the log, a data commit's is
// logged with its cause, which is how the run sees that it fired.
var workerFailpoints = []string{
	durable.FailWrite + "=error*1", durable.FailSync + "=error*1", durable.FailRename + "=error*1",
	failpoint.BeforeManifestLink + "=error*1", failpoint.AfterLinkBeforeDirSync + "=error*2",
	failpoint.AfterCommitBeforeTrim + "=error*1", failpoint.AfterFilesPrepared + "=error*1",
	failpoint.AfterDescriptorRecord + "=error*1",
}

// walFailpoints are the injected errors of io-wal.
var walFailpoints = []string{durable.FailWrite + "=error*1", durable.FailSync + "=error*1", durable.FailRename + "=error*1"}

// killPoints are where publish-kill dies.
var killPoints = []string{failpoint.AfterWALEpochCheck, failpoint.AfterEpochAdvance, failpoint.BeforeManifestLink,
	failpoint.AfterLinkBeforeDirSync, failpoint.AfterCommitBeforeTrim, failpoint.AfterFilesPrepared, failpoint.AfterDescriptorRecord}

// compactKillPoints are where compact-kill dies: its commits (the fence
// and the compaction) and the durable writes of the merged files.
var compactKillPoints = []string{failpoint.BeforeManifestLink, failpoint.AfterLinkBeforeDirSync, durable.FailLink, durable.FailSync}

// fault is one scheduled fault.
type fault struct {
	At     time.Duration // from the start of the fault phase
	Kind   string
	Target string        // a member, or a table for a one-shot
	Hold   time.Duration // how long the member stays killed, stopped or faulty
	Spec   string        // failpoint spec (io-*, *-kill)
	// OlderThan is clean's --older-than.
	OlderThan time.Duration
}

func (f fault) String() string {
	s := fmt.Sprintf("+%5.2fs %-13s %-8s", f.At.Seconds(), f.Kind, f.Target)
	if f.Hold > 0 {
		s += fmt.Sprintf(" hold %.2fs", f.Hold.Seconds())
	}
	if f.Kind == Clean || f.Kind == CleanKill {
		s += " --older-than " + f.OlderThan.String()
	}
	if f.Spec != "" {
		s += " " + f.Spec
	}
	return s
}

// tally is the fault's name in the run's tally of planned and fired
// faults: its kind and, for an injected one, where.
func (f fault) tally() string {
	if f.Spec == "" {
		return f.Kind
	}
	return f.Kind + " " + strings.SplitN(f.Spec, "=", 2)[0]
}

// schedule draws n faults over the phase from seed, never two at once on
// one member. Kinds in exclude are left out.
func schedule(seed uint64, phase time.Duration, n, workers int, exclude []string) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	kinds := slices.DeleteFunc(slices.Clone(Kinds), func(k string) bool { return slices.Contains(exclude, k) })
	if len(kinds) == 0 {
		return nil
	}
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	busy := map[string]time.Duration{} // member → busy until
	var out []fault
	// Every run compacts, cleans and fails a worker's fsync under its
	// faults (unless excluded).
	var must []string
	for _, pair := range [][2]string{{Compact, CompactKill}, {Clean, CleanKill}, {FsyncWorker, FsyncWorker}} {
		if k := pair[rng.IntN(2)]; slices.Contains(kinds, k) {
			must = append(must, k)
		}
	}
	for i := 0; i < n; i++ {
		at := dur(0, phase)
		for try := 0; try < 10; try++ {
			kind := kinds[rng.IntN(len(kinds))]
			if i < len(must) {
				kind = must[i]
			}
			f := draw(rng, kind, workers, dur)
			f.At = at
			if busy[f.Target] > at {
				continue
			}
			switch {
			case f.Kind == IOWorker || f.Kind == FsyncWorker || f.Kind == IOWAL:
				// An injected fault may outlive its hold until it fires.
				busy[f.Target] = at + f.Hold + armWait + 200*time.Millisecond
			case !slices.Contains(oneShots, f.Kind):
				busy[f.Target] = at + f.Hold + 200*time.Millisecond
			}
			out = append(out, f)
			break
		}
	}
	slices.SortStableFunc(out, func(a, b fault) int { return int(a.At - b.At) })
	return out
}

// draw fills in a fault of kind: its target, hold and failpoint spec.
func draw(rng *rand.Rand, kind string, workers int, dur func(lo, hi time.Duration) time.Duration) fault {
	worker := fmt.Sprintf("worker-%d", rng.IntN(workers))
	// Compaction and clean go where workers publish (t1, t2): t3 is held by
	// catch-up executors almost all the time, and a catch-up reservation
	// cannot be revoked to make room.
	workerTable := func() string { return tables[rng.IntN(2)] }
	pastTTL := func() time.Duration { return dur(claimTTL+500*time.Millisecond, 2*claimTTL) }
	switch kind {
	case KillWorker:
		return fault{Kind: kind, Target: worker, Hold: dur(100*time.Millisecond, 1500*time.Millisecond)}
	case StopWorker:
		return fault{Kind: kind, Target: worker, Hold: pastTTL()}
	case KillWAL:
		return fault{Kind: kind, Target: "wal", Hold: dur(100*time.Millisecond, 1500*time.Millisecond)}
	case StopWAL:
		return fault{Kind: kind, Target: "wal", Hold: dur(500*time.Millisecond, 2*claimTTL)}
	case KillEtcd:
		return fault{Kind: kind, Target: "etcd", Hold: dur(100*time.Millisecond, 2*time.Second)}
	case StopEtcd:
		return fault{Kind: kind, Target: "etcd", Hold: pastTTL()}
	case KillMaster:
		return fault{Kind: kind, Target: "master", Hold: dur(100*time.Millisecond, 2*time.Second)}
	case StopMaster:
		return fault{Kind: kind, Target: "master", Hold: dur(500*time.Millisecond, 3*time.Second)}
	case KillExec:
		return fault{Kind: kind, Target: "executor"}
	case StopExec:
		return fault{Kind: kind, Target: "executor", Hold: pastTTL()}
	case IOWorker:
		return fault{Kind: kind, Target: worker, Hold: dur(2*time.Second, 4*time.Second), Spec: workerFailpoints[rng.IntN(len(workerFailpoints))]}
	case FsyncWorker:
		return fault{Kind: kind, Target: worker, Hold: dur(2*time.Second, 4*time.Second), Spec: durable.FailSync + "=error*1"}
	case IOWAL:
		return fault{Kind: kind, Target: "wal", Hold: dur(time.Second, 3*time.Second), Spec: walFailpoints[rng.IntN(len(walFailpoints))]}
	case Publish:
		return fault{Kind: kind, Target: tables[rng.IntN(len(tables))]}
	case PublishKill:
		return fault{Kind: kind, Target: tables[rng.IntN(len(tables))], Spec: killPoints[rng.IntN(len(killPoints))] + "=kill*1"}
	case Compact:
		return fault{Kind: kind, Target: workerTable()}
	case CompactKill:
		return fault{Kind: kind, Target: workerTable(), Spec: compactKillPoints[rng.IntN(len(compactKillPoints))] + "=kill*1"}
	case Clean:
		return fault{Kind: kind, Target: workerTable(), OlderThan: time.Duration(rng.IntN(4)) * time.Second}
	case CleanKill:
		return fault{Kind: kind, Target: workerTable(), OlderThan: 0, Spec: durable.FailRemove + "=kill*1"}
	}
	panic("unknown fault kind " + kind)
}

// formatSchedule lists a schedule, one fault a line.
func formatSchedule(fs []fault) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}
