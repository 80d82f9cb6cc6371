package catchupe2e

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/failpoint"
	coremaster "github.com/walctl/walctl/internal/core/master"
)

// Three masters on one etcd under an admission storm (every master's API
// asked for every table, the leader's own scan admitting too): the leader
// is SIGKILLed mid-storm. Another takes over after the lease, and the
// etcd history shows one controller at a time: no Job name ever got two
// identities, every reservation was released exactly once, slots never
// exceeded max_jobs — and no executor process was started twice.
func TestThreeMastersLeaderKilledDuringAdmissionStorm(t *testing.T) {
	tables := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	tr := newTrio(t, tables, true, "--enabled", "--owned-targets", strings.Join(tables, ","), "--max-jobs", "2",
		"--threshold-generations", "2", "--backoff-min", "1s", "--backoff-max", "2s")
	for _, name := range []string{"m0", "m1", "m2"} {
		tr.start(name)
	}
	old, oldInfo := tr.leader(nil)

	var reserved, refusedFollower, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range tr.masters {
		c, err := coremaster.NewClient(m.url, token, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ; ; time.Sleep(20 * time.Millisecond) {
				for _, table := range tables {
					select {
					case <-stop:
						return
					default:
					}
					a, err := c.Submit(tr.ctx, coremaster.SubmitRequest{Target: table, Reason: "storm"})
					var ae *coremaster.APIError
					switch {
					case err == nil && a.Decision == catchup.DecisionReserved:
						reserved.Add(1)
					case errors.As(err, &ae) && ae.Code == "not_leader":
						refusedFollower.Add(1)
					case err != nil:
						failed.Add(1)
					}
				}
			}
		}()
	}
	// The leader's own scan may admit every table before a storm call does:
	// either source counts.
	waitFor(t, "two reservations in the storm", func() bool { return reservedBy(t, old) >= 2 })
	killed := time.Now()
	old.p.Kill()
	nl, li := tr.leader(old)
	takeover := li.ElectedAt.Sub(killed)
	// More backlog, so that the new leader has something to admit (from
	// the storm or its own scan) whatever the old one already finished.
	tr.load("s0")
	tr.load("s1")
	waitFor(t, "two reservations by the new leader", func() bool { return reservedBy(t, nl) >= 2 })
	close(stop)
	wg.Wait()
	tr.waitIdle()

	n := tr.audit(2)
	for job, starts := range tr.processStarts() {
		if starts != 1 {
			t.Errorf("job %s: %d executor processes started", job, starts)
		}
	}
	if li.ID == oldInfo.ID {
		t.Fatalf("the killed leader %s still leads", oldInfo.ID)
	}
	// Status works on every replica, leader or follower.
	for _, m := range tr.masters {
		var st catchup.Status
		if m == old {
			continue
		}
		if code := tr.api(m, http.MethodGet, "/api/v1/catchup?target=s0", nil, &st); code != http.StatusOK || st.Target != "s0" || st.Active {
			t.Fatalf("status on %s: HTTP %d %+v", m, code, st)
		}
	}
	t.Logf("storm: %d reserved, %d follower answers followed or refused, %d failed calls (the killed master's); %d reservations released once each",
		reserved.Load(), refusedFollower.Load(), failed.Load(), n)
	t.Logf("leader %s SIGKILLed; %s elected %s later (lease TTL %s + observe interval %s = %s)",
		old, nl, takeover.Round(time.Millisecond), leaderTTL, observeInterval, leaderTTL+observeInterval)
}

// reservedBy is how many catch-ups master m admitted, through its API or
// its own backlog scan.
func reservedBy(t *testing.T, m *replicaProc) float64 {
	t.Helper()
	n := 0.0
	for _, src := range []string{"api", "scan"} {
		n += max(0, metric(t, m, "walctl_catchup_admissions_total", `decision="reserved"`, `source="`+src+`"`))
	}
	return n
}

// A stall cancellation on three masters, with the leader SIGKILLed while
// the stall is suspected, ends as it does with no kill: the new leader
// observes afresh (a new grace period, never a hastened cancellation),
// cancels by CAS on the observed progress (seq 1, execution 1), closes
// admission, terminates the predecessor's executor and releases the slot
// with one failure counted.
func TestThreeMastersLeaderKilledDuringStallCancellation(t *testing.T) {
	fpDir := t.TempDir()
	// Nothing is admitted but through the API: no backlog when the masters
	// start (their first scan), no later scan.
	tr := newTrio(t, []string{"calm", "kill"}, false, "--enabled", "--owned-targets", "calm,kill", "--max-jobs", "2",
		"--threshold-generations", "2", "--startup-window", "1s", "--idle", "2s", "--confirmation", "1s",
		"--backoff-min", "1h", "--backoff-max", "1h")
	tr.scanInterval = time.Hour
	env := []string{failpoint.EnvSpec + "=" + failpoint.AfterWALEpochCheck + "=pause*1", failpoint.EnvDir + "=" + fpDir}
	for _, name := range []string{"m0", "m1", "m2"} {
		tr.start(name, env...)
	}
	tr.load("calm")
	tr.load("kill")
	tr.run("backlog", "scan")
	stalled := func(table string, kill bool) catchup.Status {
		t.Helper()
		lead, _ := tr.leader(nil)
		_ = os.Remove(filepath.Join(fpDir, failpoint.AfterWALEpochCheck+".paused"))
		var a catchup.Admission
		if code := tr.api(lead, http.MethodPost, "/api/v1/catchup", map[string]any{"target": table}, &a); code != http.StatusOK ||
			a.Decision != catchup.DecisionReserved {
			t.Fatalf("submit %s: HTTP %d %+v", table, code, a)
		}
		lead.p.WaitFile(filepath.Join(fpDir, failpoint.AfterWALEpochCheck+".paused"))
		if kill {
			waitFor(t, "the leader suspects the stall", func() bool {
				var st catchup.Status
				tr.api(lead, http.MethodGet, "/api/v1/catchup?target="+table, nil, &st)
				return st.Observation != nil && st.Observation.Verdict == catchup.VerdictSuspect
			})
			lead.p.Kill()
			lead, _ = tr.leader(lead)
		}
		var st catchup.Status
		waitFor(t, "the stalled catch-up of "+table+" ends", func() bool {
			tr.api(lead, http.MethodGet, "/api/v1/catchup?target="+table, nil, &st)
			return !st.Active && st.FinishedAt != nil
		})
		return st
	}
	calm, killed := stalled("calm", false), stalled("kill", true)
	for _, st := range []catchup.Status{calm, killed} {
		if st.Outcome == nil || *st.Outcome != catchup.OutcomeFailure || st.ConsecutiveFailures != 1 ||
			st.OutcomeDetail == nil || !strings.HasPrefix(*st.OutcomeDetail, "stalled: ") {
			t.Fatalf("%s: outcome %v (%v), %d failures; want a stall failure counted once", st.Target, st.Outcome, st.OutcomeDetail, st.ConsecutiveFailures)
		}
	}
	if l, err := tr.store.List(tr.ctx); err != nil || len(l.Reservations) != 0 {
		t.Fatalf("reservations left: %+v %v", l.Reservations, err)
	}
	casCalm, casKilled := tr.cancellation("calm"), tr.cancellation("kill")
	if casCalm != casKilled || casCalm != (casOutcome{By: "controller", Seq: 1, Exec: 1, Failure: true, Done: true}) {
		t.Fatalf("cancellation CAS: one master %+v, leader killed %+v; want the same, on seq 1 of execution 1", casCalm, casKilled)
	}
	tr.audit(2)
	t.Logf("stall cancelled by CAS on seq %d of execution %d with and without a leader kill", casKilled.Seq, casKilled.Exec)
}

// SIGSTOP the leader while it holds a controller write (checked locally,
// not yet sent), past its lease; another master leads; SIGCONT: etcd
// refuses the late write (the leader key's revision is gone), the old
// leader counts it, stops its controller and answers as a follower.
func TestSIGSTOPLeaderPastLeaseWritesRefused(t *testing.T) {
	fpDir := t.TempDir()
	tr := newTrio(t, []string{"p0"}, true, "--enabled", "--owned-targets", "p0", "--threshold-generations", "2")
	old := tr.start("m0", failpoint.EnvSpec+"="+failpoint.BeforeControllerWrite+"=pause*1", failpoint.EnvDir+"="+fpDir)
	if m, _ := tr.leader(nil); m != old {
		t.Fatalf("%s leads, want m0", m)
	}
	old.p.WaitFile(filepath.Join(fpDir, failpoint.BeforeControllerWrite+".paused"))
	tr.start("m1")
	tr.start("m2")
	old.p.Stop()
	stopped := time.Now()
	nl, li := tr.leader(old)
	if err := os.WriteFile(filepath.Join(fpDir, failpoint.BeforeControllerWrite+".resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old.p.Cont()
	waitFor(t, "the old leader's late write refused by etcd", func() bool {
		return metric(t, old, "walctl_catchup_leader_refused_writes_total", `by="etcd"`) >= 1
	})
	waitFor(t, "the old leader stops leading", func() bool { return metric(t, old, "walctl_catchup_leader") == 0 })
	// The log line may reach stderr a moment after the gauge drops.
	waitFor(t, "the old leader logs its lost leadership", func() bool { return strings.Contains(old.p.Stderr(), "leadership lost") })
	// It is a follower now: admissions go to the new leader.
	var eb coremaster.ErrorBody
	if code := tr.api(old, http.MethodPost, "/api/v1/catchup", map[string]any{"target": "p0", "dry_run": true}, &eb); code != http.StatusServiceUnavailable ||
		eb.Code != "not_leader" || eb.Leader != nl.url {
		t.Fatalf("old leader's answer: HTTP %d %+v, want 503 not_leader naming %s", code, eb, nl.url)
	}
	if metric(t, nl, "walctl_catchup_leader") != 1 {
		t.Fatalf("%s no longer leads", nl)
	}
	t.Logf("m0 stopped for the lease; %s elected %s after SIGSTOP; m0's held write refused by etcd (%v), local refusals %v",
		nl, li.ElectedAt.Sub(stopped).Round(time.Millisecond),
		metric(t, old, "walctl_catchup_leader_refused_writes_total", `by="etcd"`),
		metric(t, old, "walctl_catchup_leader_refused_writes_total", `by="local"`))
}

// casOutcome is what a cancellation CAS decided, as the target record
// keeps it.
type casOutcome struct {
	By        string
	Seq, Exec uint64
	Failure   bool
	Done      bool
}

// cancellation reads the termination intent the last attempt of table
// ended with, from the etcd history of its target record.
func (tr *trio) cancellation(table string) casOutcome {
	tr.t.Helper()
	key := etcdPrefix + "/catchup/targets/" + table
	var out casOutcome
	for _, ev := range tr.history() {
		if string(ev.Kv.Key) != key {
			continue
		}
		var r struct {
			Termination *catchup.Termination `json:"termination"`
		}
		decodeRecord(tr.t, ev.Kv.Value, &r)
		if t := r.Termination; t != nil {
			out = casOutcome{By: t.By, Seq: t.ObservedSeq, Exec: t.ObservedExec, Failure: t.Failure, Done: t.Done}
		}
	}
	return out
}

// api is one request to master m's API.
func (tr *trio) api(m *replicaProc, method, path string, body, out any) int {
	n := &node{t: tr.t, ctx: tr.ctx}
	return n.api(m.url, method, path, body, out)
}

// waitFor polls cond until it holds (a deadline, not synchronisation).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
