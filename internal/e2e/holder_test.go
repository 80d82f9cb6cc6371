package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/testutil/proc"
)

// Issue 13 item 2: a second `worker run` on the same data dir borrows the
// first one's embedded etcd and WAL (rule 11: it talks to the holder's
// servers). When the first exits, the second must not idle on the dead
// ports for ever: it exits 5, naming the holder's pid and what it was
// using, so that its supervisor restarts it — and restarted, it opens the
// embedded parts itself and publishes.
func TestSecondWorkerExitsWhenHolderGoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	c := &cluster{t: t, ctx: ctx, dir: dir, seq: new(atomic.Int64)}
	c.procs = proc.NewRunner(walctlBin, dir)
	c.procs.WaitTimeout = waitTimeout
	data := filepath.Join(dir, "data")
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`[{"name": "id", "type": "int64"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	walctl := func(name string, args ...string) *proc.Proc {
		return c.start(name, nil, append([]string{"--data-dir", data}, args...)...)
	}
	expect(t, "table create", walctl("create", "table", "create", "orders", "--schema", schema).Wait(), exitOK)

	run := []string{"worker", "run", "--tables", "orders", "--poll-interval", "100ms", "--command-timeout", "2s", "--log-level", "debug"}
	first := walctl("first", run...)
	first.WaitFile(filepath.Join(data, "wal", "ENDPOINT"))
	first.WaitFile(filepath.Join(data, "etcd", "ENDPOINT"))
	second := walctl("second", run...)
	waitFor(t, "the second worker to start on the first one's servers", func() bool {
		s := second.Stderr()
		if second.Exited() {
			t.Fatalf("the second worker ended: %s", second.Wait())
		}
		return strings.Contains(s, "worker started") && strings.Contains(s, "using the WAL server of the process holding the data dir")
	})

	first.Signal(syscall.SIGTERM)
	expect(t, "first worker", first.Wait(), exitOK)
	r := second.Wait()
	expect(t, "second worker after the holder exited", r, exitUnavailable)
	if !strings.Contains(r.Stderr, "pid "+strconv.Itoa(first.Pid())) || !strings.Contains(r.Stderr, "has exited") {
		t.Fatalf("the second worker's error does not name the holder that went:\n%s", r.Stderr)
	}

	// Restarted, it is the holder: it serves the WAL itself and publishes.
	third := walctl("third", run...)
	third.WaitFile(filepath.Join(data, "wal", "ENDPOINT"))
	expect(t, "wal append through the restarted worker", walctl("load", "wal", "load", "--table", "orders", "--bytes", "64KiB", "--batch-rows", "100").Wait(), exitOK)
	expect(t, "wal seal", walctl("seal", "wal", "seal", "--table", "orders").Wait(), exitOK)
	waitFor(t, "the restarted worker to publish", func() bool {
		r := walctl("read", "table", "read", "orders", "--count", "--output", "json").Wait()
		return r.Code == exitOK && strings.Contains(r.Stdout, `"row_count"`) && !strings.Contains(r.Stdout, `"row_count": 0`)
	})
	third.Signal(syscall.SIGTERM)
	expect(t, "third worker", third.Wait(), exitOK)
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
