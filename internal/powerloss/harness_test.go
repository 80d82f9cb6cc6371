package powerloss

import (
	"context"
	"errors"
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
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/powerfs"
	"github.com/walctl/walctl/internal/testutil/proc"
)

const (
	table  = "pl"
	shards = 2
	// startTimeout bounds each wait for a process to come up; reachTimeout
	// how long a cut waits for its failpoint before cutting anyway.
	startTimeout = 60 * time.Second
	reachTimeout = 8 * time.Second
	// callTimeout bounds each call of the test to the WAL server.
	callTimeout = 20 * time.Second
)

// harness is one run: a power-loss mount holding the WAL directory and the
// worker's data directory, an etcd outside it, the WAL server and worker
// processes, and the producers' ledger.
type harness struct {
	t      *testing.T
	ctx    context.Context
	dir    string
	fs     *powerfs.FS
	etcd   *etcdembed.Server
	etcdC  *clientv3.Client
	runner *proc.Runner
	led    *ledger
	schema *arrow.Schema
	seed   uint64

	srv, worker *proc.Proc
	cli         *walflight.Client
	procs       int

	stopProducers context.CancelFunc
	waitProducers func() error

	history []string // one line per cut, for the failure report
}

func (h *harness) walDir() string    { return filepath.Join(h.fs.Dir(), "wal") }
func (h *harness) workerDir() string { return filepath.Join(h.fs.Dir(), "worker") }
func (h *harness) lanceRoot() string { return filepath.Join(h.workerDir(), "tables") }

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
	r := proc.NewRunner(walctlBin, dir, "WALCTL_LOG_LEVEL=info", "WALCTL_COMMAND_TIMEOUT=10s")
	r.WaitTimeout = startTimeout
	return &harness{t: t, ctx: ctx, dir: dir, fs: pfs, etcd: srv, etcdC: cli, runner: r, led: newLedger(), seed: seed}
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

// startWAL starts `walctl wal serve` on the mount with the failpoints fp
// ("" for none). It returns the name of the failpoint the server paused at
// before it was ready, if any ("" once it serves).
func (h *harness) startWAL(fp string, loss *powerfs.Loss) string {
	h.t.Helper()
	h.procs++
	addrFile := filepath.Join(h.dir, fmt.Sprintf("wal-%d.addr", h.procs))
	env := []string{"WALCTL_WAL_GENERATION_BYTES=65536", "WALCTL_WAL_GENERATION_AGE=300ms"}
	if fp != "" {
		env = append(env, "WALCTL_FAILPOINTS="+fp+"=pause*1")
	}
	h.srv = h.runner.Start(h.t, fmt.Sprintf("wal-%d", h.procs), env,
		"wal", "serve", "--dir", h.walDir(), "--listen", "127.0.0.1:0", "--addr-file", addrFile)
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return h.dial(strings.TrimSpace(string(b)))
		}
		if fp != "" {
			if _, err := os.Stat(filepath.Join(h.srv.FailpointDir, fp+".paused")); err == nil {
				return fp
			}
		}
		if h.srv.Exited() {
			h.fail(loss, "wal serve on the surviving tree exited: %s", h.srv.Wait())
		}
		if time.Now().After(deadline) {
			h.fail(loss, "wal serve did not come up within %s:\n%s", startTimeout, h.srv.Stderr())
		}
	}
}

func (h *harness) dial(addr string) string {
	h.t.Helper()
	cli, err := walflight.Dial(h.ctx, addr, walflight.ClientOptions{Conns: 2})
	if err != nil {
		h.t.Fatal(err)
	}
	h.cli = cli
	return ""
}

// startWorker starts `walctl worker run` with its data directory (and so
// its Lance root) on the mount, with the failpoints fp ("" for none).
func (h *harness) startWorker(fp string) {
	h.t.Helper()
	h.procs++
	env := []string{"WALCTL_CLAIM_TTL=3s", "WALCTL_PUBLICATION_MAX_GENERATIONS=4", "WALCTL_WORKER_POLL_INTERVAL=200ms"}
	if fp != "" {
		env = append(env, "WALCTL_FAILPOINTS="+fp+"=pause*1")
	}
	h.worker = h.runner.Start(h.t, fmt.Sprintf("worker-%d", h.procs), env,
		"--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.cli.Addr(), "--data-dir", h.workerDir(),
		"worker", "run", "--tables", table)
}

func (h *harness) createTable() {
	h.t.Helper()
	spec := filepath.Join(h.dir, "schema.json")
	if err := os.WriteFile(spec, []byte(`[{"name": "id", "type": "int64"},
 {"name": "body", "type": "utf8", "nullable": true},
 {"name": "vec", "type": "fixed_size_list<float32>[4]"}]`), 0o644); err != nil {
		h.t.Fatal(err)
	}
	r := h.runner.Run(h.t, "create", nil, "--etcd-endpoints", h.etcd.Endpoint(), "--wal", h.cli.Addr(), "table", "create", table, "--schema", spec, "--shards", strconv.Itoa(shards))
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
	h.waitProducers = h.led.produce(ctx, h.cli, table, h.schema, shards, h.seed+uint64(h.procs)*7919)
}

// powerCut kills every process at once, stops the producers (their appends
// in flight become of unknown outcome), and rebuilds the surviving tree
// (with torn writes when tear is set).
func (h *harness) powerCut(tear *rand.Rand) *powerfs.Loss {
	h.t.Helper()
	for _, p := range []*proc.Proc{h.srv, h.worker} {
		if p != nil {
			p.Signal(9)
		}
	}
	for _, p := range []*proc.Proc{h.srv, h.worker} {
		if p != nil {
			p.Kill()
		}
	}
	h.led.onAck(nil)
	if h.stopProducers != nil {
		h.stopProducers()
		if err := h.waitProducers(); err != nil {
			h.t.Fatal(err)
		}
		h.stopProducers = nil
	}
	h.cli.Close()
	loss, err := h.fs.PowerCut(powerfs.CutOptions{Tear: tear})
	if err != nil {
		h.t.Fatal(err)
	}
	// The dead worker's claim lapses with its lease; dropping it now only
	// saves the test the TTL.
	if _, err := h.etcdC.Delete(h.ctx, coord.DefaultPrefix+"/claims/", clientv3.WithPrefix()); err != nil {
		h.t.Fatal(err)
	}
	return loss
}

// checkSurvivors checks, on the restarted WAL server, that the table is
// still registered, no ACKed position is gone, and no shard is trimmed past
// the watermark of the table's latest version (rule 9: the versions the WAL
// was trimmed against survive).
func (h *harness) checkSurvivors(loss *powerfs.Loss) {
	h.t.Helper()
	st, err := h.stats()
	if err != nil {
		h.fail(loss, "after the power cut the WAL does not answer for table %s: %v", table, err)
	}
	wm, err := h.watermarks()
	if err != nil {
		h.fail(loss, "after the power cut the table cannot be read: %v", err)
	}
	h.led.mu.Lock()
	defer h.led.mu.Unlock()
	for _, s := range st.Shards {
		if acked := h.led.maxPos[s.Shard]; s.LastPosition < acked {
			h.fail(loss, "shard %d: position %d was ACKed, the WAL ends at %d after the power cut", s.Shard, acked, s.LastPosition)
		}
		if s.TrimmedThrough > wm[s.Shard] {
			h.fail(loss, "shard %d: the WAL is trimmed through %d, the table's latest version has watermark %d: a version the WAL was trimmed against is gone",
				s.Shard, s.TrimmedThrough, wm[s.Shard])
		}
	}
}

// stats asks the WAL server for the table's statistics, within callTimeout.
func (h *harness) stats() (wal.TableStats, error) {
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	return h.cli.Stats(ctx, table, nil)
}

// watermarks reads the latest version's watermarks (none before the first
// publication).
func (h *harness) watermarks() (publish.Watermarks, error) {
	r, err := publish.OpenReader(h.lanceRoot(), table, publish.Selection{})
	if errors.Is(err, lance.ErrDatasetNotFound) || errors.Is(err, lance.ErrVersionNotFound) {
		return publish.Watermarks{}, nil
	}
	if err != nil {
		return nil, err
	}
	return r.State.Watermarks, nil
}
