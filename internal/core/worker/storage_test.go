package worker

import (
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/publish"
)

// A failed fsync (issue 12 item 3) stops the table in this worker: logged
// at error level once, never retried (not even after the backoffs that
// would retry a corrupt table), while the other tables go on.
func TestStorageFailureStopsTheTable(t *testing.T) {
	e := newEnv(t, 1, "bad", "good")
	e.mustProduce("bad", 0, 2, 20)
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(durable.FailSync+"=error*1", ""); err != nil {
		t.Fatal(err)
	}
	a := e.start("worker-a", publish.Limits{}, Config{
		Tables:            []string{"bad", "good"},
		PollInterval:      20 * time.Millisecond,
		ErrorBackoff:      20 * time.Millisecond,
		CorruptBackoff:    20 * time.Millisecond,
		MaxCorruptBackoff: 20 * time.Millisecond,
	})
	waitFor(t, 20*time.Second, "bad's storage failure", func() bool {
		return a.count(a.m.Errors, "bad", string(kindStorage)) == 1
	})
	// More work for both: good is published (the worker keeps polling),
	// bad is not looked at again.
	e.mustProduce("bad", 0, 1, 20)
	e.mustProduce("good", 0, 2, 20)
	waitFor(t, 20*time.Second, "good to be published", func() bool { return e.published("good") })
	e.mustProduce("good", 0, 1, 20)
	waitFor(t, 20*time.Second, "good's new records", func() bool { return e.published("good") })
	if n := a.count(a.m.Errors, "bad", string(kindStorage)); n != 1 {
		t.Fatalf("bad failed %v times on storage: it was retried", n)
	}
	// The first failing fsync may be the WAL's epoch advance (during the
	// acquisition) or the table's own (after it): either way the table is
	// acquired at most once.
	if n := a.count(a.m.ClaimChanges, "bad", EventAcquired); n > 1 {
		t.Fatalf("bad acquired %v times after its storage failed", n)
	}
	if e.published("bad") {
		t.Fatal("bad was published after its storage failed")
	}
	a.stop(t)
	e.exactlyOnce("good")
	e.noClaims()
}
