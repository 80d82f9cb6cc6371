package catchupe2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lineage"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/proc"
)

const schema = `[{"name": "id", "type": "int64"}, {"name": "body", "type": "utf8", "nullable": true}]`

// A table with a backlog of tens of MiB and a producer appending throughout:
// the master admits a catch-up through its API, the local runner starts
// `walctl catchup run`, and it publishes everything sealed when it started
// in several batches, recording progress. Every record ACKed before t0 (the
// admission) is published by t1 (the Job's end), and in the end the
// official LanceDB reader shows every ACKed record exactly once.
func TestCatchUpLargeBacklogWithLiveProducer(t *testing.T) {
	f := setup(t, nil)
	n, master, base, prod := f.n, f.master, f.base, f.prod

	// The backlog: ~24 MiB in 1 MiB generations over two shards.
	for i := 0; i < 120; i++ {
		if err := prod.Append(n.ctx, i%2, 1000); err != nil {
			t.Fatal(err)
		}
	}
	// The live producer appends throughout, both shards, until stopped —
	// between appends, so that no append's outcome is left unknown (an
	// append cancelled in flight may be durable without being ACKed).
	var stopped atomic.Bool
	stopLive := func() { stopped.Store(true) }
	var liveErr atomic.Pointer[error]
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stopped.Load(); i++ {
			if err := prod.Append(n.ctx, i%2, 200); err != nil {
				liveErr.Store(&err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { stopLive(); wg.Wait() }()

	for len(prod.Acked.Snapshot()) < 122000 && liveErr.Load() == nil && n.ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // let the live producer get going
	}

	// t0: everything ACKed so far is sealed, then scanned and submitted.
	ackedAtT0 := prod.Acked.Snapshot()
	f.sealAll()
	n.run("backlog", "scan", "--output", "json")
	var a catchup.Admission
	if code := n.api(base, http.MethodPost, "/api/v1/catchup", map[string]any{"target": "big", "reason": "e2e"}, &a); code != http.StatusOK {
		t.Fatalf("submit: HTTP %d %+v", code, a)
	}
	if a.Decision != catchup.DecisionReserved || a.JobID == nil {
		t.Fatalf("submit: decision %s (%s), want reserved", a.Decision, a.Message)
	}
	t.Logf("t0: %d records ACKed; admitted job %s", len(ackedAtT0), *a.JobID)

	// t1: the Job has ended and its slot is released.
	st, maxSeq := waitFinished(t, n, base, "big")
	if st.Outcome == nil || *st.Outcome != catchup.OutcomeSuccess {
		t.Fatalf("catch-up outcome %v (%v), want success; master stderr:\n%s", st.Outcome, st.OutcomeDetail, master.Stderr())
	}
	if st.JobID == nil || *st.JobID != *a.JobID || st.JobUID == nil {
		t.Fatalf("status names job %v uid %v, want %s", st.JobID, st.JobUID, *a.JobID)
	}
	published := n.publishedIDs("big")
	for id := range ackedAtT0 {
		if published[id] != 1 {
			t.Fatalf("id %d ACKed before t0 is published %d times at t1", id, published[id])
		}
	}
	for id, c := range published {
		if c != 1 {
			t.Fatalf("id %d published %d times", id, c)
		}
	}
	rep := jobReport(t, n, *a.JobID)
	t.Logf("t1: %d ids published; executor: %s, %d batches, %d commits, %d rows, %d bytes; max progress seq seen %d",
		len(published), rep.Outcome, rep.ProgressBatches, rep.ProgressCommits, rep.Rows, rep.Bytes, maxSeq)
	if rep.Outcome != executor.OutcomeCaughtUp || rep.ProgressCommits < 3 || rep.ProgressBatches < 3 || rep.Bytes < 20<<20 {
		t.Fatalf("executor report %+v: want caught_up after at least 3 batches and commits covering > 20 MiB", rep)
	}
	for shard, pos := range rep.Target {
		if rep.Watermarks[shard] < pos {
			t.Fatalf("shard %d: watermark %d below the target %d sealed at start", shard, rep.Watermarks[shard], pos)
		}
	}

	// The producer stops; what it appended meanwhile is published by an
	// ordinary publish, and every ACKed record is in the table exactly once.
	stopLive()
	wg.Wait()
	if err := liveErr.Load(); err != nil {
		t.Fatal(*err)
	}
	f.sealAll()
	n.run("publish", "--table", "big", "--all", "--output", "json")
	t.Logf("end: %d ACKed records, each published exactly once (official reader)", f.exactlyOnce())
	jobPubs := 0
	for _, b := range rep.Batches {
		if b.Outcome == publish.OutcomePublished {
			jobPubs++
		}
	}
	checkHistoryNamesTheJob(t, n, *a.JobID, jobPubs)

	master.Signal(syscall.SIGTERM)
	if r := master.Wait(); r.Code != 0 {
		t.Fatalf("master exited %d after SIGTERM: %s", r.Code, r)
	}
}

// fleet is one node with a master, the WAL client and a producer.
type fleet struct {
	n      *node
	master *proc.Proc
	base   string
	w      *walflight.Client
	prod   *exactlyonce.Producer
}

// setup creates table big (two shards) and starts the master with
// masterEnv. With no backlog yet, the master's first scan admits nothing,
// and its next scan is an hour away, so the API is what admits.
func setup(t *testing.T, masterEnv []string) fleet {
	t.Helper()
	n := newNode(t, "WALCTL_WAL_GENERATION_BYTES=1048576", "WALCTL_WAL_GENERATION_AGE=500ms")
	if err := os.WriteFile(filepath.Join(n.dir, "schema.json"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	n.run("table", "create", "big", "--schema", filepath.Join(n.dir, "schema.json"), "--shards", "2")
	master := n.startEnv("master", masterEnv, "master", "run", "--listen", "127.0.0.1:0", "--enabled", "--owned-targets", "big",
		"--threshold-generations", "4", "--batch-generations", "4", "--scan-interval", "1h", "--observe-interval", "1s")
	base := master.WaitFile(filepath.Join(n.dataDir(), "master", "ENDPOINT"))
	walAddr := master.WaitFile(filepath.Join(n.dataDir(), "wal", "ENDPOINT"))
	w, err := walflight.Dial(n.ctx, walAddr, walflight.ClientOptions{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	info, err := w.Table(n.ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	prod, err := exactlyonce.NewProducer(w, "big", info.Schema, 7, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	prod.Gen.StringBytes = 200
	return fleet{n: n, master: master, base: base, w: w, prod: prod}
}

// sealAll seals both shards' open generations.
func (f fleet) sealAll() {
	f.n.t.Helper()
	for shard := 0; shard < 2; shard++ {
		if _, err := f.w.Seal(f.n.ctx, "big", shard); err != nil {
			f.n.t.Fatal(err)
		}
	}
}

// exactlyOnce requires every ACKed id published exactly once, nothing else.
func (f fleet) exactlyOnce() int {
	f.n.t.Helper()
	ids, err := exactlyonce.OracleIDs(f.n.ctx, f.n.tablePath("big"))
	if err != nil {
		f.n.t.Fatal(err)
	}
	acked := f.prod.Acked.Snapshot()
	if err := exactlyonce.Check(ids, acked).Err(); err != nil {
		f.n.t.Fatalf("table big (official reader): %v", err)
	}
	return len(acked)
}

// waitFinished polls the status until the table's attempt has ended and
// its slot is released; it also returns the highest progress sequence seen.
func waitFinished(t *testing.T, n *node, base, table string) (catchup.Status, uint64) {
	t.Helper()
	var maxSeq uint64
	deadline := time.Now().Add(waitTimeout)
	for {
		var st catchup.Status
		if code := n.api(base, http.MethodGet, "/api/v1/catchup?target="+table, nil, &st); code != http.StatusOK {
			t.Fatalf("status: HTTP %d", code)
		}
		if st.Progress != nil && st.Progress.Seq > maxSeq {
			maxSeq = st.Progress.Seq
		}
		if !st.Active && st.FinishedAt != nil {
			return st, maxSeq
		}
		if time.Now().After(deadline) {
			t.Fatalf("catch-up of %s did not finish: %+v", table, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// jobReport reads the executor's JSON report from the Job's log.
func jobReport(t *testing.T, n *node, job string) executor.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dataDir(), "master", "jobs", job+".log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(b, []byte("\n"))
	i := slices.IndexFunc(lines, func(l []byte) bool { return string(l) == "{" })
	if i < 0 {
		t.Fatalf("no report in the job log:\n%s", b)
	}
	var rep executor.Report
	if err := json.NewDecoder(bytes.NewReader(bytes.Join(lines[i:], []byte("\n")))).Decode(&rep); err != nil {
		t.Fatalf("job report: %v\n%s", err, b)
	}
	return rep
}

// checkHistoryNamesTheJob: `walctl table history` credits exactly the
// executor's commits to the catch-up Job (its id and an execution), and
// the final one-shot publish to a committer that is not the Job.
func checkHistoryNamesTheJob(t *testing.T, n *node, jobID string, publications int) {
	t.Helper()
	var h struct {
		Versions []lineage.Version `json:"versions"`
	}
	if err := json.Unmarshal([]byte(n.run("table", "history", "--table", "big", "--output", "json")), &h); err != nil {
		t.Fatal(err)
	}
	byJob, other := 0, 0
	for _, v := range h.Versions {
		if v.Operation != lineage.OpPublication {
			continue
		}
		switch c := v.Committer; {
		case c == nil:
			t.Fatalf("version %d: a walctl publication without a committer", v.Version)
		case c.Kind == coord.OwnerCatchup && c.JobID == jobID && c.Execution != "":
			byJob++
		case c.JobID == jobID:
			t.Fatalf("version %d: committer %+v names the Job but not as a catch-up execution", v.Version, *c)
		default:
			other++
		}
	}
	if byJob != publications || other == 0 {
		t.Fatalf("history: %d publications by job %s (the executor reported %d publications), %d by others (want >= 1)", byJob, jobID, publications, other)
	}
	t.Logf("history: %d publications credited to job %s, %d to the one-shot publish", byJob, jobID, other)
}
