package e2e

import (
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/testutil/metrics"
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
	a.WaitPaused(failpoint.BeforeManifestLink)

	const polls = 12
	before := c.scrape()
	for i := 0; i < polls; i++ {
		r := c.run("poll", nil, "publish", "--table", "orders")
		expect(t, "poll of a busy table", r, exitConflict)
		if !strings.Contains(r.Stderr, "busy hint") {
			t.Fatalf("poll %d was not refused by the busy hint: %s", i, r.Stderr)
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
		d := after.MustSum(t, x.name, x.label) - before.MustSum(t, x.name, x.label)
		t.Logf("%d polls: %s %v", polls, x.what, d)
		if d != 0 {
			t.Errorf("%d polls of a busy table cost %v %s", polls, d, x.what)
		}
	}
	t.Logf("%d polls: Range RPCs %v", polls, after.MustSum(t, "grpc_server_handled_total", `grpc_method="Range"`)-
		before.MustSum(t, "grpc_server_handled_total", `grpc_method="Range"`))

	// Control: the revocation is a transaction and a lease revoke.
	before = c.scrape()
	c.revoke("orders")
	after = c.scrape()
	for _, x := range costs[:1] {
		if d := after.MustSum(t, x.name, x.label) - before.MustSum(t, x.name, x.label); d < 1 {
			t.Errorf("control: a revocation shows %v %s: the measurement is blind", d, x.what)
		}
	}
	for _, x := range costs[6:] {
		if d := after.MustSum(t, x.name, x.label) - before.MustSum(t, x.name, x.label); d < 1 {
			t.Errorf("control: a revocation shows %v %s: the measurement is blind", d, x.what)
		}
	}

	// A's epoch is still the table's: its commit may land. Either way the
	// work ends up published exactly once.
	a.Resume(failpoint.BeforeManifestLink)
	if ra := a.Wait(); ra.Code != exitOK && ra.Code != exitConflict {
		t.Fatalf("A after the revocation: %s", ra)
	}
	expect(t, "publish --all", c.run("publish", nil, "publish", "--table", "orders", "--all"), exitOK)
	p.exactlyOnce()
}

// scrape reads the etcd server's Prometheus metrics.
func (c *cluster) scrape() metrics.Metrics {
	c.t.Helper()
	return metrics.MustScrape(c.t, c.etcd.MetricsURL())
}
