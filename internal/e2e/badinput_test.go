package e2e

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Bad input: an unknown table, etcd down, two WAL servers on one data
// directory, revoking an absent claim. Each fails with its documented exit
// code and a clear message, and leaves nothing behind.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 7)
	p.generation(2, 30)
	expect(t, "publish", c.run("publish", nil, "publish", "--table", "orders", "--all"), exitOK)
	p.exactlyOnce()

	t.Run("unknown table", func(t *testing.T) {
		c := c.forT(t)
		for _, verb := range []string{"publish", "prepare"} {
			r := c.run(verb, nil, verb, "--table", "nope")
			expect(t, verb+" --table nope", r, exitNotFound)
			t.Logf("%s: %s", verb, lastLine(r.Stderr))
			// Under --output json the error is a JSON object: quotes come escaped.
			if !strings.Contains(r.Stderr, `"nope"`) && !strings.Contains(r.Stderr, `\"nope\"`) && !strings.Contains(r.Stderr, " nope") {
				t.Fatalf("%s does not name the table: %s", verb, r.Stderr)
			}
		}
		if m, err := filepath.Glob(filepath.Join(c.lance, "nope*")); err != nil || len(m) != 0 {
			t.Fatalf("an unknown table left %v (%v)", m, err)
		}
	})

	t.Run("etcd down", func(t *testing.T) {
		c := c.forT(t)
		p.c = c
		c.createTable("fresh")
		fresh := c.producer("fresh", 8)
		fresh.generation(2, 30)
		p.generation(2, 30) // pending work on the published table too
		before := listTree(t, c.tablePath("orders"))
		epochs := []uint64{c.walEpoch("orders"), c.walEpoch("fresh")}
		for _, table := range []string{"orders", "fresh"} {
			for _, verb := range []string{"publish", "prepare"} {
				args := append(c.globalArgs("127.0.0.1:1"), "--command-timeout", "2s", verb, "--table", table)
				r := c.start(verb, nil, args...).Wait()
				expect(t, verb+" "+table+" with etcd down", r, exitUnavailable)
				if !strings.Contains(r.Stderr, "127.0.0.1:1") {
					t.Fatalf("%s does not name the unreachable etcd: %s", verb, r.Stderr)
				}
				t.Logf("%s %s: %s", verb, table, lastLine(r.Stderr))
			}
		}
		if after := listTree(t, c.tablePath("orders")); !slices.Equal(before, after) {
			t.Fatalf("etcd down, yet the table changed:\nbefore %v\nafter  %v", before, after)
		}
		if tree := listTree(t, c.tablePath("fresh")); len(tree) != 0 {
			t.Fatalf("etcd down, yet the new table has files: %v", tree)
		}
		if now := []uint64{c.walEpoch("orders"), c.walEpoch("fresh")}; !slices.Equal(now, epochs) {
			t.Fatalf("etcd down, yet publisher epochs moved from %v to %v", epochs, now)
		}
		// With etcd back the work is published exactly once.
		expect(t, "publish orders", c.run("publish", nil, "publish", "--table", "orders", "--all"), exitOK)
		expect(t, "publish fresh", c.run("publish", nil, "publish", "--table", "fresh", "--all"), exitOK)
		p.exactlyOnce()
		fresh.exactlyOnce()
	})

	t.Run("two WAL servers on one data dir", func(t *testing.T) {
		c := c.forT(t)
		r := c.start("wal-serve-2", nil, "--data-dir", filepath.Join(c.dir, "walsrv"), "wal", "serve",
			"--listen", "127.0.0.1:0", "--addr-file", filepath.Join(c.dir, "wal2.addr")).Wait()
		expect(t, "second wal serve", r, exitConflict)
		if !strings.Contains(r.Stderr, "pid "+strconv.Itoa(c.walSrv.Pid())) {
			t.Fatalf("second wal serve does not name the holder's pid %d: %s", c.walSrv.Pid(), r.Stderr)
		}
		t.Logf("second wal serve: %s", lastLine(r.Stderr))
		// The first server is unharmed.
		if _, err := c.wal.Tables(c.ctx); err != nil {
			t.Fatalf("first WAL server after the refused second: %v", err)
		}
	})

	t.Run("revoke an absent claim", func(t *testing.T) {
		c := c.forT(t)
		for _, table := range []string{"orders", "nope"} {
			r := c.run("revoke", nil, "claim", "revoke", table)
			expect(t, "claim revoke "+table, r, exitNotFound)
			t.Logf("revoke %s: %s", table, lastLine(r.Stderr))
			if !strings.Contains(r.Stderr, table) {
				t.Fatalf("claim revoke does not name %s: %s", table, r.Stderr)
			}
		}
	})
}
