package catchupe2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/testutil/proc"
	"github.com/walctl/walctl/internal/testutil/stack"
)

// Timing of the multi-master fleet: a short lease so that takeovers happen
// within the test, whole seconds as etcd grants them.
const (
	leaderTTL       = 2 * time.Second
	observeInterval = time.Second
	etcdPrefix      = "/walctl/v1"
)

// trio is several `walctl master run` processes on one etcd (embedded in
// the test process: it is never the one killed) and one `wal serve`
// process, each master with a data dir of its own and its executors as
// child processes (the local runner).
type trio struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	cli     *clientv3.Client
	store   *catchup.Store
	walctl  *proc.Runner
	tables  []string
	masters []*replicaProc
	args    []string
	// scanInterval is the masters' backlog scan interval (default the
	// observe interval).
	scanInterval time.Duration
}

// replicaProc is one master process (restartable under its name).
type replicaProc struct {
	name string
	dir  string
	p    *proc.Proc
	url  string
}

// newTrio starts etcd, the WAL server and the tables (with preload, each
// with a sealed backlog of several generations: load); policyArgs are the catch-up flags every
// master runs with (they must agree: the policy is persisted).
func newTrio(t *testing.T, tables []string, preload bool, policyArgs ...string) *trio {
	t.Helper()
	st := stack.StartEtcd(t, testTimeout)
	ctx, dir, srv := st.Ctx, st.Dir, st.Etcd
	co := st.Coord(t, coord.Config{Prefix: etcdPrefix})
	walAddr, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	tr := &trio{t: t, ctx: ctx, dir: dir, cli: co.Etcd(), store: catchup.NewStore(co, catchup.StoreOptions{}),
		tables: tables, args: policyArgs, scanInterval: observeInterval}
	tr.walctl = proc.NewRunner(walctlBin, dir, "WALCTL_ETCD_ENDPOINTS="+srv.Endpoint(), "WALCTL_WAL="+walAddr,
		"WALCTL_LANCE_ROOT="+st.LanceRoot, "WALCTL_MASTER_TOKEN="+token,
		"WALCTL_WAL_GENERATION_BYTES=32768", "WALCTL_WAL_GENERATION_AGE=1h", "WALCTL_LOG_LEVEL=info")
	tr.walctl.WaitTimeout = waitTimeout
	addrFile := filepath.Join(dir, "wal.addr")
	wal := tr.walctl.Start(t, "wal", nil, "--data-dir", filepath.Join(dir, "procs", "wal"), "wal", "serve",
		"--dir", filepath.Join(dir, "wal"), "--listen", walAddr, "--addr-file", addrFile)
	wal.WaitFile(addrFile)
	schemaFile := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schemaFile, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		tr.run("table", "create", table, "--schema", schemaFile, "--shards", "1")
		if preload {
			tr.load(table)
		}
	}
	return tr
}

// load gives table a sealed backlog of several generations.
func (tr *trio) load(table string) {
	tr.t.Helper()
	tr.run("wal", "load", "--table", table, "--bytes", "200KiB", "--batch-rows", "50", "--producers", "1")
	tr.run("wal", "seal", "--table", table)
}

// run runs a one-shot walctl command and requires exit 0.
func (tr *trio) run(args ...string) string {
	tr.t.Helper()
	r := tr.walctl.Run(tr.t, args[0], nil, append([]string{"--data-dir", filepath.Join(tr.dir, "procs", "cli")}, args...)...)
	if r.Code != 0 {
		tr.t.Fatalf("walctl %s: %s", strings.Join(args, " "), r)
	}
	return r.Stdout
}

// start starts master name (again, on its data dir) with env added, and
// waits until it serves.
func (tr *trio) start(name string, env ...string) *replicaProc {
	tr.t.Helper()
	dir := filepath.Join(tr.dir, "procs", name)
	_ = os.Remove(filepath.Join(dir, "master", "ENDPOINT"))
	env = append([]string{"WALCTL_MASTER_LOCAL_GRACE=1s"}, env...)
	args := append([]string{"--data-dir", dir, "master", "run", "--listen", "127.0.0.1:0",
		"--leader-ttl", leaderTTL.String(), "--observe-interval", observeInterval.String(), "--scan-interval", tr.scanInterval.String()},
		tr.args...)
	p := tr.walctl.Start(tr.t, name, env, args...)
	m := &replicaProc{name: name, dir: dir, p: p}
	m.url = p.WaitFile(filepath.Join(dir, "master", "ENDPOINT"))
	tr.masters = append(tr.masters, m)
	return m
}

// leader waits until a live master other than not leads and returns it,
// with its election record.
func (tr *trio) leader(not *replicaProc) (*replicaProc, catchup.LeaderInfo) {
	tr.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		li, ok, err := tr.store.Leader(tr.ctx)
		if err != nil {
			tr.t.Fatal(err)
		}
		for _, m := range tr.masters {
			if ok && m != not && m.url == li.URL && !m.p.Exited() && metric(tr.t, m, "walctl_catchup_leader") == 1 {
				// Read again: the record the campaign put is rewritten with
				// the election time once the term is confirmed.
				if li, ok, err = tr.store.Leader(tr.ctx); err != nil || !ok {
					tr.t.Fatalf("leader record: %v %v", ok, err)
				}
				return m, li
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	tr.t.Fatal("no master leads")
	return nil, catchup.LeaderInfo{}
}

var metricsClient = &http.Client{Timeout: 5 * time.Second}

// metric reads one unlabelled (or first-labelled) sample of m's /metrics;
// -1 when absent or the master does not answer.
func metric(t *testing.T, m *replicaProc, name string, labels ...string) float64 {
	t.Helper()
	resp, err := metricsClient.Get(m.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	sel := name
	if len(labels) > 0 {
		sel += "{" + strings.Join(labels, ",") + "}"
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sel) + ` (\S+)$`)
	mm := re.FindSubmatch(body)
	if mm == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(mm[1]), 64)
	if err != nil {
		t.Fatalf("metric %s: %v", sel, err)
	}
	return v
}

// history is every event under the catch-up and reservation keys from
// revision 1 to now (etcd keeps it: nothing compacts in the test), with
// the previous value of each key.
func (tr *trio) history() []*clientv3.Event {
	tr.t.Helper()
	end := etcdPrefix + "/catchup/zz-history-end"
	put, err := tr.cli.Put(tr.ctx, end, "x")
	if err != nil {
		tr.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(tr.ctx)
	defer cancel()
	var out []*clientv3.Event
	for wr := range tr.cli.Watch(ctx, etcdPrefix+"/", clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithPrevKV()) {
		if err := wr.Err(); err != nil {
			tr.t.Fatal(err)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision >= put.Header.Revision {
				return out
			}
			out = append(out, ev)
		}
	}
	tr.t.Fatal("history watch ended early")
	return nil
}

// fleetRecord is what the audit needs of a target or slot record.
type fleetRecord struct {
	Phase catchup.Phase `json:"phase"`
	JobID string        `json:"job_id"`
	Job   *struct {
		UID string `json:"uid"`
	} `json:"job"`
	Table string `json:"table"`
}

// audit replays the history and checks the single-controller invariants:
// every Job name got at most one Job identity (no duplicate Job for a
// reservation), every reservation was released exactly once (no slot
// freed twice), and slots never exceeded maxJobs at any revision. It
// returns the number of reservations seen.
func (tr *trio) audit(maxJobs int) int {
	tr.t.Helper()
	slotsDir, targetsDir := etcdPrefix+"/catchup/slots/", etcdPrefix+"/catchup/targets/"
	uids := map[string]map[string]bool{}
	releases, slotFrees := map[string]int{}, map[string]int{}
	held := 0
	for _, ev := range tr.history() {
		key := string(ev.Kv.Key)
		switch {
		case strings.HasPrefix(key, slotsDir) && ev.Type == clientv3.EventTypePut && ev.IsCreate():
			if held++; held > maxJobs {
				tr.t.Fatalf("revision %d: %d slots held, max_jobs %d", ev.Kv.ModRevision, held, maxJobs)
			}
		case strings.HasPrefix(key, slotsDir) && ev.Type == clientv3.EventTypeDelete:
			held--
			var s fleetRecord
			decodeRecord(tr.t, ev.PrevKv.Value, &s)
			slotFrees[s.JobID]++
		case strings.HasPrefix(key, targetsDir) && ev.Type == clientv3.EventTypePut:
			var cur, prev fleetRecord
			decodeRecord(tr.t, ev.Kv.Value, &cur)
			if ev.PrevKv != nil {
				decodeRecord(tr.t, ev.PrevKv.Value, &prev)
			}
			if cur.Job != nil && cur.Job.UID != "" {
				if uids[cur.JobID] == nil {
					uids[cur.JobID] = map[string]bool{}
				}
				uids[cur.JobID][cur.Job.UID] = true
			}
			if prev.Phase.Active() && !cur.Phase.Active() {
				releases[prev.JobID]++
			}
		}
	}
	for job, u := range uids {
		if len(u) != 1 {
			tr.t.Errorf("job %s recorded with %d identities %v: a duplicate Job", job, len(u), u)
		}
	}
	for job, n := range releases {
		if n != 1 || slotFrees[job] != 1 {
			tr.t.Errorf("job %s released %d times, its slot freed %d times; want once each", job, n, slotFrees[job])
		}
	}
	return len(releases)
}

func decodeRecord(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("record %s: %v", b, err)
	}
}

// processStarts counts, per Job name, the executor processes every master
// (dead ones included) started.
func (tr *trio) processStarts() map[string]int {
	re := regexp.MustCompile(`msg="catch-up process started" job=(\S+)`)
	out := map[string]int{}
	for _, m := range tr.masters {
		for _, mm := range re.FindAllStringSubmatch(m.p.Stderr(), -1) {
			out[mm[1]]++
		}
	}
	return out
}

// waitIdle waits until no table has an active catch-up and none has been
// admitted for three scan intervals (a retry backs off at most 2s here), so
// the leader's scan ran while idle and found no backlog to admit: a table
// loaded during its catch-up is admitted again by the next scan after that
// one ends, so one idle moment is not the end.
func (tr *trio) waitIdle() {
	tr.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var idleSince time.Time
	for {
		l, err := tr.store.List(tr.ctx)
		if err != nil {
			tr.t.Fatal(err)
		}
		switch {
		case len(l.Reservations) != 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) > 3*tr.scanInterval:
			return
		}
		if time.Now().After(deadline) {
			tr.t.Fatalf("catch-ups still active: %+v", l.Reservations)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *replicaProc) String() string { return fmt.Sprintf("%s (%s)", m.name, m.url) }
