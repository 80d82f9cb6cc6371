package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// Settings that keep a run short: claims lapse 2 s after their holder
// stops renewing, generations seal at 300 ms or 32 KiB, calls to a stopped
// dependency give up after 3 s.
const (
	claimTTL       = 2 * time.Second
	commandTimeout = 3 * time.Second
	masterToken    = "chaos"
)

// Tables: the workers publish t1 and t2; the master owns t2 and t3 for
// catch-up, so t2 sees workers and executors compete and t3 (no worker) is
// published by executors and one-shot publishers only.
var (
	tables       = []string{"t1", "t2", "t3"}
	workerTables = "t1,t2"
	ownedTargets = "t2,t3"
)

const schemaSpec = `[{"name": "id", "type": "int64"}, {"name": "body", "type": "utf8", "nullable": true}]`

// member is one process of the system under test, restartable with the
// same directories and address.
type member struct {
	name    string
	start   func(env []string) (*proc.Proc, error)
	p       *proc.Proc
	stopped bool
	killed  bool // by the schedule, until its hold ends
	// failpoints is the WALCTL_FAILPOINTS spec it runs with ("" for none);
	// armed the tally name of its injected fault until that fires, and
	// armedUntil, once its hold ended unfired, how long it may still fire.
	failpoints, armed string
	armedUntil        time.Time
	// logs are the stderr of its earlier processes.
	logs []string
}

// system is one run's processes and directories.
type system struct {
	t        *testing.T
	ctx      context.Context
	dir      string
	walctl   *proc.Runner
	etcdRun  *proc.Runner
	etcdAddr string
	etcdPeer string
	walAddr  string
	lance    string
	members  map[string]*member
	order    []string // member names, in start order
	notes    []string // what the supervisor had to repair
	// problems are what fails the run besides the final checks: members
	// that ended unexpectedly, one-shots that crashed.
	problems []string
	// faults tallies the planned faults and those that fired.
	faults *exactlyonce.Faults
	// oneShots are the one-shot commands started; cleaned tells whether a
	// `table clean` was among them (versions may be gone).
	oneShots []*oneShot
	cleaned  bool
	// compactions and versionsRemoved count what the successful compact and
	// clean one-shots did; revokes the claims one-shots revoked.
	compactions, versionsRemoved, revokes int
	// lastDepFault is when a fault of etcd or the WAL server last began or
	// ended.
	lastDepFault time.Time
	// execFaults are the executor faults started; execMissed counts those
	// that found no executor running.
	execFaults map[fault]*execFault
	execMissed int
	// resumePending is set when a process that stopped a table for the
	// fleet (a failed fsync) was restarted: the operator lifts the stop
	// (resumeStops); resumes counts the stops lifted.
	resumePending bool
	resumes       int
	// masterPgids are the process groups of the masters started so far
	// (an executor lives in the group of the master that started it).
	mu          sync.Mutex
	masterPgids []int
}

func (s *system) masterGroups() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.masterPgids)
}

func newSystem(t *testing.T, ctx context.Context, workers int) *system {
	t.Helper()
	// The run's directory outlives a failed run, for its logs, WAL and tables.
	dir, err := os.MkdirTemp(os.Getenv(EnvLogs), "walctl-chaos-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	s := &system{t: t, ctx: ctx, dir: dir, lance: filepath.Join(dir, "tables"), members: map[string]*member{}, faults: exactlyonce.NewFaults(),
		execFaults: map[fault]*execFault{}}
	if s.etcdAddr, err = proc.FreePort(); err != nil {
		t.Fatal(err)
	}
	if s.etcdPeer, err = proc.FreePort(); err != nil {
		t.Fatal(err)
	}
	if s.walAddr, err = proc.FreePort(); err != nil {
		t.Fatal(err)
	}
	s.etcdRun = proc.NewRunner(etcdBin(t), dir)
	s.walctl = proc.NewRunner(walctlBin, dir,
		"WALCTL_ETCD_ENDPOINTS=http://"+s.etcdAddr, "WALCTL_WAL="+s.walAddr, "WALCTL_LANCE_ROOT="+s.lance,
		"WALCTL_COMMAND_TIMEOUT="+commandTimeout.String(), "WALCTL_CLAIM_TTL="+claimTTL.String(), "WALCTL_LOG_LEVEL=info",
		"WALCTL_PUBLICATION_MAX_GENERATIONS=4", "WALCTL_PUBLICATION_FILE_BYTES=16384",
		"WALCTL_WAL_GENERATION_BYTES=32768", "WALCTL_WAL_GENERATION_AGE=300ms")
	s.walctl.WaitTimeout = 90 * time.Second

	s.add("etcd", s.startEtcd)
	s.add("wal", s.startWAL)
	for _, m := range []string{"etcd", "wal"} {
		if err := s.restart(m, ""); err != nil {
			t.Fatal(err)
		}
	}
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(schemaSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if r := s.walctl.Run(t, "create-"+table, nil, "--data-dir", s.procDir("create"), "table", "create", table,
			"--schema", schema, "--shards", "2"); r.Code != 0 {
			t.Fatalf("table create %s: %s", table, r)
		}
	}
	for i := 0; i < workers; i++ {
		name := fmt.Sprintf("worker-%d", i)
		s.add(name, func(env []string) (*proc.Proc, error) { return s.startWorker(name, env), nil })
	}
	s.add("master", s.startMaster)
	for _, name := range s.order[2:] {
		if err := s.restart(name, ""); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *system) add(name string, start func(env []string) (*proc.Proc, error)) {
	s.members[name] = &member{name: name, start: start}
	s.order = append(s.order, name)
}

func (s *system) procDir(name string) string { return filepath.Join(s.dir, "procs", name) }

func (s *system) tablePath(table string) string { return filepath.Join(s.lance, table+".lance") }

// restart kills the member if it runs and starts it again, with the
// failpoint spec fp ("" for none). A process that fails to start because
// of its failpoint is left dead; restart reports any other start failure.
func (s *system) restart(name, fp string) error {
	m := s.members[name]
	if m.p != nil {
		// The process alone: a killed master's executors live on (as Jobs
		// outlive a master); the test's cleanup ends every group.
		m.p.Kill()
		m.logs = append(m.logs, m.p.Stderr())
		if stoppedFleet(m.p.Stderr()) {
			s.resumePending = true
		}
		if m.armed != "" && injected(m.p.Stderr()) {
			s.faults.Fire(m.armed)
		}
	}
	var env []string
	if fp != "" {
		env = []string{"WALCTL_FAILPOINTS=" + fp}
	}
	m.failpoints, m.armed, m.armedUntil, m.stopped, m.killed = fp, "", time.Time{}, false, false
	p, err := m.start(env)
	m.p = p
	if name == "master" && p != nil {
		s.mu.Lock()
		s.masterPgids = append(s.masterPgids, p.Pid())
		s.mu.Unlock()
	}
	if err != nil && fp != "" && errors.Is(err, proc.ErrGone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

// stoppedFleet reports whether a process's log shows that a failed fsync
// stopped one of its tables for the fleet (recorded in etcd or not yet).
func stoppedFleet(stderr string) bool {
	return strings.Contains(stderr, "stopped for the whole fleet") || strings.Contains(stderr, "stop could not be recorded yet")
}

// resumeStops is the operator's runbook after a failed fsync stopped a
// table for the fleet (rule 24): the process that met it was restarted
// (the injected failure was the storage's only fault), so every stop is
// lifted with the audited `table resume`. With etcd away it is tried again
// at the next tick.
func (s *system) resumeStops() {
	run := func(args ...string) proc.Result {
		return s.walctl.Start(s.t, "operator", nil, append([]string{"--data-dir", s.procDir("operator"), "--output", "json"}, args...)...).Wait()
	}
	r := run("table", "stopped")
	var stops []struct {
		Table string `json:"table"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &stops) != nil {
		return
	}
	for _, st := range stops {
		if r := run("table", "resume", "--table", st.Table, "--reason", "chaos: the process that met the failed fsync was restarted"); r.Code != 0 {
			return
		}
		s.resumes++
		s.faults.Fire("(stops resumed)")
	}
	s.resumePending = false
}

// injected reports whether a process's log shows an injected fault.
func injected(stderr string) bool { return strings.Contains(stderr, "injected error") }

// startEtcd starts etcd on its data dir and waits until it is healthy.
func (s *system) startEtcd(env []string) (*proc.Proc, error) {
	peer := "http://" + s.etcdPeer
	client := "http://" + s.etcdAddr
	p := s.etcdRun.Start(s.t, "etcd", env, "--name", "chaos", "--data-dir", filepath.Join(s.dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "chaos="+peer,
		"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error")
	return p, waitHealthy(s.ctx, client+"/health", p)
}

// waitHealthy polls etcd's /health until it answers 200 (it has a leader).
func waitHealthy(ctx context.Context, url string, p *proc.Proc) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-p.Done():
			return fmt.Errorf("etcd: %w: %s", proc.ErrGone, p.Wait())
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy: %w; stderr:\n%s", ctx.Err(), p.Stderr())
		}
	}
}

// startWAL starts `wal serve` on its directory and fixed address and waits
// for the address file.
func (s *system) startWAL(env []string) (*proc.Proc, error) {
	addrFile := filepath.Join(s.dir, "wal.addr")
	_ = os.Remove(addrFile)
	p := s.walctl.Start(s.t, "wal", env, "--data-dir", s.procDir("wal"), "wal", "serve",
		"--dir", filepath.Join(s.dir, "wal"), "--listen", s.walAddr, "--addr-file", addrFile)
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	_, err := proc.WaitForFile(ctx, addrFile, p.Done())
	return p, err
}

func (s *system) startWorker(name string, env []string) *proc.Proc {
	return s.walctl.Start(s.t, name, env, "--data-dir", s.procDir(name), "worker", "run",
		"--tables", workerTables, "--poll-interval", "100ms", "--slice-rounds", "2", "--idle-release-rounds", "2")
}

// startMaster starts the master with the local runner; it admits a
// catch-up of an owned target at 3 pending generations.
func (s *system) startMaster(env []string) (*proc.Proc, error) {
	env = append([]string{"WALCTL_MASTER_TOKEN=" + masterToken, "WALCTL_MASTER_LOCAL_GRACE=1s",
		"WALCTL_CATCHUP_BACKOFF_MIN=1s", "WALCTL_CATCHUP_BACKOFF_MAX=2s"}, env...)
	return s.walctl.Start(s.t, "master", env, "--data-dir", s.procDir("master"), "master", "run",
		"--listen", "127.0.0.1:0", "--enabled", "--owned-targets", ownedTargets, "--threshold-generations", "3",
		"--batch-generations", "2", "--scan-interval", "1s", "--observe-interval", "1s"), nil
}
