package worker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/publish"
)

// pauseFirstCommit pauses the first Lance commit of the process (the first
// round's fence) at the named failpoint and returns the files that announce
// the pause and resume it.
func pauseFirstCommit(t *testing.T) (paused, resume string) {
	t.Helper()
	dir := t.TempDir()
	if err := failpoint.Enable(failpoint.BeforeManifestLink+"=pause*1", dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	return filepath.Join(dir, failpoint.BeforeManifestLink+".paused"), filepath.Join(dir, failpoint.BeforeManifestLink+".resume")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A round admitted before shutdown is not cancelled by it: the worker's
// first round is held at a failpoint inside its first commit, Run's context
// is cancelled, and the round still completes and publishes once resumed;
// only then does Run return, with the claim released.
func TestShutdownLetsAdmittedRoundFinish(t *testing.T) {
	e := newEnv(t, 2, "orders")
	e.mustProduce("orders", 0, 5, 40)
	e.mustProduce("orders", 1, 5, 40)
	paused, resume := pauseFirstCommit(t)
	a := e.start("worker-a", publish.Limits{}, Config{Tables: []string{"orders"}, PollInterval: 20 * time.Millisecond, ShutdownGrace: -1})
	waitFor(t, 20*time.Second, "the first commit to pause", func() bool { return exists(paused) })

	a.cancel()
	select {
	case <-a.exited:
		t.Fatalf("Run returned %v while an admitted round was still running", a.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(resume, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	if got := a.count(a.m.Records, "orders"); got != 400 {
		t.Fatalf("the admitted round published %v records, want 400", got)
	}
	if !e.published("orders") {
		t.Fatal("table not published after the admitted round")
	}
	e.exactlyOnce("orders")
	e.noClaims()
}

// After ShutdownGrace the admitted round is cancelled at its next step (here
// the paused commit gives up): Run still returns nil, the claim is released,
// nothing was published, and a successor publishes everything exactly once.
func TestShutdownGraceCancelsRound(t *testing.T) {
	e := newEnv(t, 1, "orders")
	e.mustProduce("orders", 0, 5, 40)
	paused, _ := pauseFirstCommit(t)
	cfg := Config{Tables: []string{"orders"}, PollInterval: 20 * time.Millisecond, ShutdownGrace: 200 * time.Millisecond}
	a := e.start("worker-a", publish.Limits{}, cfg)
	waitFor(t, 20*time.Second, "the first commit to pause", func() bool { return exists(paused) })
	start := time.Now()
	a.stop(t)
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("Run returned after %s, before the grace of 200ms", took)
	}
	e.noClaims()
	if got := a.count(a.m.Records, "orders"); got != 0 {
		t.Fatalf("a cancelled round published %v records", got)
	}
	if got := a.count(a.m.Rounds, "orders", OutcomeFailed); got != 1 {
		t.Fatalf("failed rounds = %v, want the one cancelled", got)
	}

	b := e.start("worker-b", publish.Limits{}, cfg)
	waitFor(t, 20*time.Second, "b to publish", func() bool { return e.published("orders") })
	b.stop(t)
	e.exactlyOnce("orders")
	e.noClaims()
}

// Losing the claim cancels the round in flight at once: the worker's first
// round is held inside its first commit, the claim is revoked, and the
// round gives up without being resumed (its context is the claim's). The
// worker then competes again, wins a newer epoch and publishes exactly once.
func TestLostClaimCancelsRoundInFlight(t *testing.T) {
	e := newEnv(t, 1, "orders")
	e.mustProduce("orders", 0, 5, 40)
	paused, _ := pauseFirstCommit(t)
	a := e.start("worker-a", publish.Limits{}, Config{Tables: []string{"orders"}, PollInterval: 20 * time.Millisecond,
		LostBackoff: 50 * time.Millisecond})
	waitFor(t, 20*time.Second, "the first commit to pause", func() bool { return exists(paused) })
	first, err := e.co.Get(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test", Reason: "cancel in flight"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the paused round to give up", func() bool {
		return a.count(a.m.Fences, "orders") == 1 && a.count(a.m.ClaimChanges, "orders", EventLost) == 1
	})
	if got := a.count(a.m.Records, "orders"); got != 0 {
		t.Fatalf("the revoked round published %v records", got)
	}
	waitFor(t, 20*time.Second, "publication under a new claim", func() bool { return e.published("orders") })
	a.stop(t)
	r, err := publish.OpenReader(e.lance, "orders", publish.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if r.State.Epoch <= first.Epoch {
		t.Fatalf("published at epoch %d, the revoked claim had %d", r.State.Epoch, first.Epoch)
	}
	e.exactlyOnce("orders")
	e.noClaims()
}
