package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/failpoint"
)

const claimTTL = 3 * time.Second

var ttlEnv = "WALCTL_CLAIM_TTL=" + claimTTL.String()

// An abandoned claim: the owner is SIGSTOPped just before linking its
// commit. A successor is refused while the lease lives and takes over only
// after real TTL expiry; the old owner, continued and resumed, publishes
// nothing.
func TestAbandonedClaimTakenOverOnlyAfterTTLExpiry(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 6)
	p.generation(3, 50)
	p.generation(3, 50)

	v := c.dataCommitVersion("orders")
	a := c.walctl("A-publish", append(fp(at(failpoint.BeforeManifestLink, "pause", v)), ttlEnv), "publish", "--table", "orders")
	a.WaitPaused(failpoint.BeforeManifestLink)
	epochA := c.walEpoch("orders")
	a.Signal(syscall.SIGSTOP)
	stopped := time.Now()

	// What etcd has left of A's lease, read after the stop: no renewal can
	// extend it any more, so no successor may get in before it runs out.
	r := c.run("inspect", nil, "claim", "inspect", "orders")
	expect(t, "claim inspect", r, exitOK)
	var claims []coord.ClaimInfo
	if err := json.Unmarshal([]byte(r.Stdout), &claims); err != nil || len(claims) != 1 {
		t.Fatalf("claim inspect: %v\n%s", err, r.Stdout)
	}
	if claims[0].LeaseTTL != claimTTL {
		t.Fatalf("A's lease TTL is %s, want %s", claims[0].LeaseTTL, claimTTL)
	}
	ttlLeft := claims[0].TTLLeft
	if ttlLeft <= 0 {
		t.Fatalf("A's lease already expiring %s after the stop (ttl left %s)", time.Since(stopped), ttlLeft)
	}

	// While the lease lives, the successor is refused.
	r = c.run("B-refused", []string{ttlEnv}, "publish", "--table", "orders", "--all")
	expect(t, "B while A's lease lives", r, exitConflict)
	if !strings.Contains(r.Stderr, "claimed by another holder") {
		t.Fatalf("B refused for another reason: %s", r)
	}
	refusedAt := time.Since(stopped)

	// Nobody revokes: the claim goes when etcd expires A's lease (watched,
	// not slept on); only then does the successor get in.
	c.waitClaimGone("orders")
	tookOver := time.Since(stopped)
	r = c.run("B-publish", []string{ttlEnv}, "publish", "--table", "orders", "--all")
	expect(t, "B after A's lease expired", r, exitOK)
	if len(parseSummary(t, r).published()) == 0 {
		t.Fatalf("B published nothing: %s", r.Stdout)
	}
	t.Logf("B refused %s after A stopped, took over %s after it (etcd had %s left of A's %s lease at the stop)",
		refusedAt.Round(time.Millisecond), tookOver.Round(time.Millisecond), ttlLeft, claimTTL)
	if tookOver < ttlLeft {
		t.Fatalf("A's claim was gone %s after the stop, before its lease (%s left) could expire", tookOver, ttlLeft)
	}
	latest := c.latestVersion("orders")
	p.exactlyOnce()

	a.Signal(syscall.SIGCONT)
	a.Resume(failpoint.BeforeManifestLink)
	ra := a.Wait()
	expect(t, "old owner A, continued and resumed", ra, exitConflict)
	t.Logf("fenced A: %s", lastLine(ra.Stderr))
	if l := c.latestVersion("orders"); l != latest {
		t.Fatalf("A changed the table: latest %d, was %d", l, latest)
	}
	c.noDataAtEpoch("orders", epochA)
	p.exactlyOnce()
}
