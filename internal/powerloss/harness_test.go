package powerloss

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/powerfs"
	"github.com/walctl/walctl/internal/testutil/proc"
)

const (
	table  = "pl"
	shards = 2
	// startTimeout bounds each wait for a process to come up; reachTimeout
	// how long a sequence waits for a planned fault to fire.
	startTimeout = 60 * time.Second
	reachTimeout = 20 * time.Second
	// callTimeout bounds each call of the test to the WAL server.
	callTimeout = 20 * time.Second
)

// harness is one run: a power-loss mount holding the WAL directory and the
// worker's data directory, an etcd outside it, the WAL server (on one
// address for the whole run, so that clients outlive its restarts), the
// worker and one-shot processes, and the producers' ledger.
type harness struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	fs      *powerfs.FS
	etcd    *etcdembed.Server
	etcdC   *clientv3.Client
	runner  *proc.Runner
	prod    *producers
	schema  *arrow.Schema
	seed    uint64
	walAddr string

	srv, worker *proc.Proc
	walAddrFile string
	oneShot     *proc.Proc // a compact or clean on the mount, if any
	// mayExit are the processes whose own end is expected (an injected
	// error or a failed fsync was aimed at them).
	mayExit map[*proc.Proc]bool
	cli     *walflight.Client
	procs   int

	stopProducers context.CancelFunc
	waitProducers func() error

	// What the cuts must not take back: every version as last seen, and
	// each shard's trimmed point and latest watermark.
	versions *exactlyonce.History
	cleaned  bool // a `table clean` ran: old versions may be gone
	trimmed  map[int]uint64
	wm       map[int]uint64

	faults       *exactlyonce.Faults
	history      []string // one line per cut, for the failure report
	compoundCuts int      // cuts that ended a compound sequence
}

func (h *harness) walDir() string    { return filepath.Join(h.fs.Dir(), "wal") }
func (h *harness) workerDir() string { return filepath.Join(h.fs.Dir(), "worker") }
func (h *harness) lanceRoot() string { return filepath.Join(h.workerDir(), "tables") }
func (h *harness) tablePath() string { return filepath.Join(h.lanceRoot(), table+".lance") }

func newHarness(t *testing.T, ctx context.Context, seed uint64) *harness {
	t.Helper()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	pfs, err := powerfs.Mount(mnt, filepath.Join(dir, "state"))
	if err != nil {
		t.Fatalf("%v: the power-loss test needs /dev/fuse and root", err)
	}
	// Cleanups run last-in first-out: the processes (registered later) are
	// killed before the unmount.
	t.Cleanup(func() {
		if err := pfs.Unmount(); err != nil {
			t.Error(err)
		}
	})
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(dir, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	addr, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := proc.NewRunner(walctlBin, dir, "WALCTL_LOG_LEVEL=info", "WALCTL_COMMAND_TIMEOUT=10s")
	r.WaitTimeout = startTimeout
	return &harness{t: t, ctx: ctx, dir: dir, fs: pfs, etcd: srv, etcdC: cli, runner: r, prod: newProducers(), seed: seed, walAddr: addr,
		mayExit: map[*proc.Proc]bool{}, versions: exactlyonce.NewHistory(), trimmed: map[int]uint64{}, wm: map[int]uint64{}, faults: exactlyonce.NewFaults()}
}

// fail ends the run with what is needed to understand and replay it.
func (h *harness) fail(loss *powerfs.Loss, format string, args ...any) {
	h.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	fmt.Fprintf(&b, "\nseed=%d; cuts so far:\n  %s", h.seed, strings.Join(h.history, "\n  "))
	if loss != nil {
		fmt.Fprintf(&b, "\nwhat the last power cut discarded:\n%s", loss)
	}
	h.t.Fatal(b.String())
}

// walStart is how a start of `wal serve` ended.
type walStart int

const (
	walServes walStart = iota // it serves (and h.cli reaches it)
	walPaused                 // it paused at the failpoint asked for, before serving
	walExited                 // it exited before serving (expected by the caller)
)

// startWAL starts `walctl wal serve` on the mount and h.walAddr with the
// failpoint spec fp ("" for none), after retiring the server before it. It
// returns once the server serves, once it paused at pause (a failpoint
// name, "" for none) before serving, or once it exited — which fails the
// run unless mayExit.
func (h *harness) startWAL(fp, pause string, mayExit bool) walStart {
	h.t.Helper()
	h.retire(&h.srv)
	h.procs++
	h.walAddrFile = filepath.Join(h.dir, fmt.Sprintf("wal-%d.addr", h.procs))
	env := []string{"WALCTL_WAL_GENERATION_BYTES=65536", "WALCTL_WAL_GENERATION_AGE=300ms"}
	if fp != "" {
		env = append(env, "WALCTL_FAILPOINTS="+fp)
	}
	h.srv = h.runner.Start(h.t, fmt.Sprintf("wal-%d", h.procs), env,
		"wal", "serve", "--dir", h.walDir(), "--listen", h.walAddr, "--addr-file", h.walAddrFile)
	h.mayExit[h.srv] = mayExit
	return h.awaitWAL(pause, mayExit)
}

// awaitWAL waits for the WAL server started last to serve (see startWAL).
func (h *harness) awaitWAL(pause string, mayExit bool) walStart {
	h.t.Helper()
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(h.walAddrFile); err == nil && len(b) > 0 {
			h.dial()
			return walServes
		}
		if pause != "" && paused(h.srv, pause) {
			return walPaused
		}
		if h.srv.Exited() {
			if mayExit {
				return walExited
			}
			h.fail(nil, "wal serve exited before serving: %s", h.srv.Wait())
		}
		if time.Now().After(deadline) {
			h.fail(nil, "wal serve did not come up within %s:\n%s", startTimeout, h.srv.Stderr())
		}
	}
}

// retire kills *pp (if it runs), checks how it ended — a crash of the Go
// runtime, or an end of its own that no fault aimed at it explains, fails
// the run — and forgets it.
func (h *harness) retire(pp **proc.Proc) {
	h.t.Helper()
	p := *pp
	if p == nil {
		return
	}
	ended := p.Exited()
	p.Kill()
	h.judgeEnd(p, ended)
	*pp = nil
}

func (h *harness) judgeEnd(p *proc.Proc, endedByItself bool) {
	h.t.Helper()
	if c := proc.Crash(p.Stderr()); c != "" {
		h.fail(nil, "%s crashed: %s\n%s", p.Name, c, p.Stderr())
	}
	if endedByItself && (!h.mayExit[p] || p.Wait().Code == 6) {
		h.fail(nil, "%s ended by itself: %s", p.Name, p.Wait())
	}
	delete(h.mayExit, p)
}

// dial connects h.cli to the WAL server unless it is connected: the
// address never changes, so a client outlives a restart of the server.
func (h *harness) dial() {
	h.t.Helper()
	if h.cli != nil {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	cli, err := walflight.Dial(ctx, h.walAddr, walflight.ClientOptions{Conns: 2})
	if err != nil {
		h.t.Fatal(err)
	}
	h.cli = cli
}

// claimTTL is the claim TTL of every walctl process of the run: short, so
// that a killed holder's table is free again soon and `table clean` (which
// keeps every version younger than twice the TTL) has old versions to
// remove.
const claimTTL = 3 * time.Second

// startWorker starts `walctl worker run` with its data directory (and so
// its Lance root) on the mount, with the failpoint spec fp ("" for none).
func (h *harness) startWorker(fp string) {
	h.t.Helper()
	if h.worker != nil {
		h.retire(&h.worker)
		h.dropClaims()
	}
	h.procs++
	env := []string{"WALCTL_CLAIM_TTL=" + claimTTL.String(), "WALCTL_PUBLICATION_MAX_GENERATIONS=4", "WALCTL_WORKER_POLL_INTERVAL=200ms"}
	if fp != "" {
		env = append(env, "WALCTL_FAILPOINTS="+fp)
	}
	h.worker = h.runner.Start(h.t, fmt.Sprintf("worker-%d", h.procs), env,
		"--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.walAddr, "--data-dir", h.workerDir(),
		"worker", "run", "--tables", table)
}

// walctl starts a one-shot walctl command on the mount (compact, clean,
// verify) with the failpoint spec fp ("" for none).
func (h *harness) walctl(name, fp string, args ...string) *proc.Proc {
	h.procs++
	env := []string{"WALCTL_CLAIM_TTL=" + claimTTL.String()}
	if fp != "" {
		env = append(env, "WALCTL_FAILPOINTS="+fp)
	}
	return h.runner.Start(h.t, fmt.Sprintf("%s-%d", name, h.procs), env,
		append([]string{"--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.walAddr, "--data-dir", h.workerDir(), "--output", "json"}, args...)...)
}

func (h *harness) createTable() {
	h.t.Helper()
	spec := filepath.Join(h.dir, "schema.json")
	if err := os.WriteFile(spec, []byte(`[{"name": "id", "type": "int64"},
 {"name": "body", "type": "utf8", "nullable": true},
 {"name": "vec", "type": "fixed_size_list<float32>[4]"}]`), 0o644); err != nil {
		h.t.Fatal(err)
	}
	r := h.runner.Run(h.t, "create", nil, "--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.walAddr, "table", "create", table, "--schema", spec, "--shards", strconv.Itoa(shards))
	if r.Code != 0 {
		h.t.Fatalf("table create: %s", r)
	}
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	info, err := h.cli.Table(ctx, table)
	if err != nil {
		h.t.Fatal(err)
	}
	h.schema = info.Schema
}

func (h *harness) startProducers() {
	ctx, cancel := context.WithCancel(h.ctx)
	h.stopProducers = cancel
	h.waitProducers = h.prod.produce(ctx, h.cli, table, h.schema, shards, h.seed+uint64(h.procs)*7919)
}

// stopProduction stops the producers, if they run, and waits for them:
// their appends in flight become of unknown outcome.
func (h *harness) stopProduction() {
	h.t.Helper()
	if h.stopProducers == nil {
		return
	}
	h.stopProducers()
	if err := h.waitProducers(); err != nil {
		h.t.Fatal(err)
	}
	h.stopProducers = nil
}

// dropClaims deletes the claims a killed worker left: they lapse with its
// lease; dropping them only saves the test the TTL.
func (h *harness) dropClaims() {
	h.t.Helper()
	if _, err := h.etcdC.Delete(h.ctx, coord.DefaultPrefix+"/claims/", clientv3.WithPrefix()); err != nil {
		h.t.Fatal(err)
	}
}

// powerCut checks that no process on the mount crashed or ended when it
// should not have, kills them all at once, stops the producers (their
// appends in flight become of unknown outcome), and rebuilds the surviving
// tree (with torn writes when tear is set). The WAL server stays down.
func (h *harness) powerCut(tear *rand.Rand) *powerfs.Loss {
	h.t.Helper()
	live := []*proc.Proc{h.srv, h.worker, h.oneShot}
	ended := make([]bool, len(live))
	for i, p := range live {
		if p != nil {
			ended[i] = p.Exited()
			p.Signal(9)
		}
	}
	for i, p := range live {
		if p != nil {
			p.Kill()
			h.judgeEnd(p, ended[i])
		}
	}
	h.srv, h.worker, h.oneShot = nil, nil, nil
	h.stopProduction()
	if h.cli != nil {
		h.cli.Close()
		h.cli = nil
	}
	loss, err := h.fs.PowerCut(powerfs.CutOptions{Tear: tear})
	if err != nil {
		h.t.Fatal(err)
	}
	h.dropClaims()
	return loss
}
