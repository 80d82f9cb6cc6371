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
	data := filepath.Join(dir, "data")
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`[{"name": "id", "type": "int64"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	walctl := func(name string, args ...string) *proc {
		return c.start(name, nil, append([]string{"--data-dir", data}, args...)...)
	}
	expect(t, "table create", walctl("create", "table", "create", "orders", "--schema", schema).wait(), exitOK)

	run := []string{"worker", "run", "--tables", "orders", "--poll-interval", "100ms", "--command-timeout", "2s", "--log-level", "debug"}
	first := walctl("first", run...)
	first.waitFile(filepath.Join(data, "wal", "ENDPOINT"))
	first.waitFile(filepath.Join(data, "etcd", "ENDPOINT"))
	second := walctl("second", run...)
	waitFor(t, "the second worker to start on the first one's servers", func() bool {
		s := second.stderr.String()
		if second.exited() {
			t.Fatalf("the second worker ended: %s", second.wait())
		}
		return strings.Contains(s, "worker started") && strings.Contains(s, "using the WAL server of the process holding the data dir")
	})

	first.signal(syscall.SIGTERM)
	expect(t, "first worker", first.wait(), exitOK)
	r := second.wait()
	expect(t, "second worker after the holder exited", r, exitUnavailable)
	if !strings.Contains(r.stderr, "pid "+strconv.Itoa(first.pid())) || !strings.Contains(r.stderr, "has exited") {
		t.Fatalf("the second worker's error does not name the holder that went:\n%s", r.stderr)
	}

	// Restarted, it is the holder: it serves the WAL itself and publishes.
	third := walctl("third", run...)
	third.waitFile(filepath.Join(data, "wal", "ENDPOINT"))
	expect(t, "wal append through the restarted worker", walctl("load", "wal", "load", "--table", "orders", "--bytes", "64KiB", "--batch-rows", "100").wait(), exitOK)
	expect(t, "wal seal", walctl("seal", "wal", "seal", "--table", "orders").wait(), exitOK)
	waitFor(t, "the restarted worker to publish", func() bool {
		r := walctl("read", "table", "read", "orders", "--count", "--output", "json").wait()
		return r.code == exitOK && strings.Contains(r.stdout, `"row_count"`) && !strings.Contains(r.stdout, `"row_count": 0`)
	})
	third.signal(syscall.SIGTERM)
	expect(t, "third worker", third.wait(), exitOK)
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
