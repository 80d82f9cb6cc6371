package catchupe2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

const (
	testTimeout = 4 * time.Minute
	waitTimeout = 2 * time.Minute
	token       = "e2e-token"
)

// node is one data dir on the embedded default: every walctl process of
// the test runs on it (the master holds the embedded etcd and the WAL;
// others reach them through the addresses it publishes there).
type node struct {
	t   *testing.T
	ctx context.Context
	dir string
	env []string
}

func newNode(t *testing.T, env ...string) *node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALCTL_") && !strings.HasPrefix(kv, "XDG_") {
			clean = append(clean, kv)
		}
	}
	clean = append(clean, "XDG_CONFIG_HOME="+filepath.Join(dir, "xdg"), "WALCTL_DATA_DIR="+filepath.Join(dir, "data"),
		"WALCTL_MASTER_TOKEN="+token)
	return &node{t: t, ctx: ctx, dir: dir, env: append(clean, env...)}
}

func (n *node) dataDir() string { return filepath.Join(n.dir, "data") }
func (n *node) tablePath(table string) string {
	return filepath.Join(n.dataDir(), "tables", table+".lance")
}

// proc is one walctl process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr walctlbin.SyncBuffer
	done   chan struct{}
}

func (n *node) start(name string, args ...string) *proc {
	n.t.Helper()
	return n.startEnv(name, nil, args...)
}

// startEnv starts walctl with env added to the node's environment.
func (n *node) startEnv(name string, env []string, args ...string) *proc {
	n.t.Helper()
	p := &proc{name: name, cmd: exec.Command(walctlBin, args...), done: make(chan struct{})}
	p.cmd.Env = append(append([]string{}, n.env...), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	n.t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	return p
}

// run runs walctl to completion and requires exit 0; it returns stdout.
func (n *node) run(args ...string) string {
	n.t.Helper()
	p := n.start(args[0], args...)
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		n.t.Fatalf("walctl %s did not end; stderr:\n%s", strings.Join(args, " "), p.stderr.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		n.t.Fatalf("walctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, p.stdout.String(), p.stderr.String())
	}
	return p.stdout.String()
}

func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// waitFile waits for path to have content and returns it trimmed.
func (n *node) waitFile(p *proc, path string) string {
	n.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b))
		}
		select {
		case <-p.done:
			n.t.Fatalf("%s ended before writing %s; stderr:\n%s", p.name, path, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s did not appear; stderr:\n%s", path, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// api sends one request to the master API and decodes the answer.
func (n *node) api(base, method, path string, body, out any) int {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(n.ctx, method, base+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			n.t.Fatalf("%s %s: HTTP %d: %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// producer appends synthetic batches through the WAL's Flight API and
// records every ACKed id.
type producer struct {
	w     *walflight.Client
	table string
	gen   *synth.Generator
	mu    sync.Mutex
	acked map[int64]bool
}

func (p *producer) append(ctx context.Context, shard, rows int) error {
	b := p.gen.Batch(rows)
	defer b.Release()
	if _, err := p.w.Append(ctx, p.table, shard, b); err != nil {
		return fmt.Errorf("append to %s shard %d: %w", p.table, shard, err)
	}
	ids := b.Column(b.Schema().FieldIndices("id")[0]).(*array.Int64)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < ids.Len(); i++ {
		p.acked[ids.Value(i)] = true
	}
	return nil
}

// snapshot copies the ids ACKed so far.
func (p *producer) snapshot() map[int64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]bool, len(p.acked))
	for id := range p.acked {
		out[id] = true
	}
	return out
}

// publishedIDs counts every id of the table's latest version as the
// official LanceDB reader sees it.
func (n *node) publishedIDs(table string) map[int64]int {
	n.t.Helper()
	d, err := oracle.MustFind(n.t).Dump(n.ctx, n.tablePath(table), oracle.DumpOptions{Columns: []string{"id"}})
	if err != nil {
		n.t.Fatal(err)
	}
	seen := make(map[int64]int, len(d.Columns["id"]))
	for _, raw := range d.Columns["id"] {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			n.t.Fatalf("id %s: %v", raw, err)
		}
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			n.t.Fatalf("id %q: %v", s, err)
		}
		seen[id]++
	}
	if d.CountRows != len(d.Columns["id"]) {
		n.t.Fatalf("official reader: count_rows %d, %d ids scanned", d.CountRows, len(d.Columns["id"]))
	}
	return seen
}
