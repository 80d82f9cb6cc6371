package e2e

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// Polling a busy table with `walctl publish` processes costs etcd nothing
// that a claim attempt would: no proposal, no transaction, no lease grant —
// measured on the etcd server. A revocation, the control, shows up in the
// same measurement.
//
// Not parallel: every embedded etcd of this test process counts into the
// same Prometheus registry, so no other test's etcd may run meanwhile
// (parallel tests start only after the sequential ones have finished).
func TestPollingBusyTableCostsEtcdNothing(t *testing.T) {
	c := newClusterWith(t, etcdembed.Options{MetricsAddr: "127.0.0.1:0"})
	c.createTable("orders")
	p := c.producer("orders", 30)
	p.generation(2, 30)

	a := c.walctl("A-publish", fp(at(failpoint.BeforeManifestLink, "pause", c.dataCommitVersion("orders"))), "publish", "--table", "orders")
	a.waitPaused(failpoint.BeforeManifestLink)

	const polls = 12
	before := c.scrape()
	for i := 0; i < polls; i++ {
		r := c.run("poll", nil, "publish", "--table", "orders")
		expect(t, "poll of a busy table", r, exitConflict)
		if !strings.Contains(r.stderr, "busy hint") {
			t.Fatalf("poll %d was not refused by the busy hint: %s", i, r.stderr)
		}
	}
	after := c.scrape()
	costs := []struct{ what, name, label string }{
		{"proposals committed", "etcd_server_proposals_committed_total", ""},
		{"proposals applied", "etcd_server_proposals_applied_total", ""},
		{"mvcc transactions", "etcd_mvcc_txn_total", ""},
		{"mvcc puts", "etcd_mvcc_put_total", ""},
		{"mvcc deletes", "etcd_mvcc_delete_total", ""},
		{"LeaseGrant RPCs", "grpc_server_handled_total", `grpc_method="LeaseGrant"`},
		{"LeaseRevoke RPCs", "grpc_server_handled_total", `grpc_method="LeaseRevoke"`},
		{"Txn RPCs", "grpc_server_handled_total", `grpc_method="Txn"`},
	}
	for _, x := range costs {
		d := after.sum(t, x.name, x.label) - before.sum(t, x.name, x.label)
		t.Logf("%d polls: %s %v", polls, x.what, d)
		if d != 0 {
			t.Errorf("%d polls of a busy table cost %v %s", polls, d, x.what)
		}
	}
	t.Logf("%d polls: Range RPCs %v", polls, after.sum(t, "grpc_server_handled_total", `grpc_method="Range"`)-
		before.sum(t, "grpc_server_handled_total", `grpc_method="Range"`))

	// Control: the revocation is a transaction and a lease revoke.
	before = c.scrape()
	c.revoke("orders")
	after = c.scrape()
	for _, x := range costs[:1] {
		if d := after.sum(t, x.name, x.label) - before.sum(t, x.name, x.label); d < 1 {
			t.Errorf("control: a revocation shows %v %s: the measurement is blind", d, x.what)
		}
	}
	for _, x := range costs[6:] {
		if d := after.sum(t, x.name, x.label) - before.sum(t, x.name, x.label); d < 1 {
			t.Errorf("control: a revocation shows %v %s: the measurement is blind", d, x.what)
		}
	}

	// A's epoch is still the table's: its commit may land. Either way the
	// work ends up published exactly once.
	a.resume(failpoint.BeforeManifestLink)
	if ra := a.wait(); ra.code != exitOK && ra.code != exitConflict {
		t.Fatalf("A after the revocation: %s", ra)
	}
	expect(t, "publish --all", c.run("publish", nil, "publish", "--table", "orders", "--all"), exitOK)
	p.exactlyOnce()
}

type metrics map[string]float64

// scrape reads the etcd server's Prometheus metrics.
func (c *cluster) scrape() metrics {
	c.t.Helper()
	resp, err := http.Get(c.etcd.MetricsURL())
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			c.t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		c.t.Fatal(err)
	}
	return m
}

// sum adds the series of name whose labels contain label; it fails if there
// is none, so a renamed metric cannot make an assertion vacuous.
func (m metrics) sum(t *testing.T, name, label string) float64 {
	t.Helper()
	total, found := 0.0, false
	for series, v := range m {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		if label != "" && !strings.Contains(series, label) {
			continue
		}
		total, found = total+v, true
	}
	if !found {
		t.Fatalf("etcd exports no %s{%s}", name, label)
	}
	return total
}
