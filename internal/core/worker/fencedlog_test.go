package worker

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

// Issue 13: a fenced round is logged as what it is. The worker's first
// round is held inside its fence commit; a successor advances the WAL epoch
// and the operator revokes the worker's claim. The round stops on its
// claim's context, and the log says "fenced by epoch E (mine M)" with the
// claim's reason — not "context canceled: dependency unavailable".
func TestFencedRoundSaysByWhichEpoch(t *testing.T) {
	e := newEnv(t, 1, "orders")
	e.mustProduce("orders", 0, 2, 10)
	paused, _ := pauseFirstCommit(t)
	var logs walctlbin.SyncBuffer
	a := e.startOn(e.log, e.connect(), "worker-a", publish.Limits{}, Config{
		Tables: []string{"orders"}, PollInterval: 20 * time.Millisecond, LostBackoff: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	waitFor(t, 20*time.Second, "the first commit to pause", func() bool { return exists(paused) })
	held, err := e.co.Get(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.AdvanceEpoch(e.ctx, "orders", held.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test", Reason: "successor"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the fenced round to be logged", func() bool { return a.count(a.m.Fences, "orders") == 1 })
	a.stop(t)
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "kind=fenced") {
			line = l
		}
	}
	want := "fenced by epoch " + itoa(held.Epoch+1) + " (mine " + itoa(held.Epoch) + ")"
	if !strings.Contains(line, want) || !strings.Contains(line, "claim is no longer held") {
		t.Fatalf("fenced round logged as\n%s\nwant %q and the claim's reason; all logs:\n%s", line, want, logs.String())
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
