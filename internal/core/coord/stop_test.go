package coord

import (
	"errors"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
)

// Rule 24 against a real etcd: a storage stop refuses every owner kind's
// claim and fails a holder's validation, the first stop is kept, and only
// an audited resume of the stop as read lifts it.
func TestStorageStopRefusesClaimsUntilResumed(t *testing.T) {
	ctx := testCtx(t)
	prefix := testPrefix(t)
	a := newClient(t, prefix, Config{})
	op := newClient(t, prefix, Config{})

	held, err := a.Acquire(ctx, "t", worker("holder"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, held)
	first, err := op.RecordStop(ctx, StopRecord{Table: "t", Reason: "fsync /lake/t.lance/_versions: input/output error", Owner: worker("p1")})
	if err != nil {
		t.Fatal(err)
	}
	again, err := op.RecordStop(ctx, StopRecord{Table: "t", Reason: "a later failure", Owner: worker("p2")})
	if err != nil || again.Revision != first.Revision || again.Owner.ID != "p1" {
		t.Fatalf("second stop: %+v, %v; want the first one kept", again, err)
	}
	// The holder's next validation (before each commit, fence and trim).
	if err := held.Valid(ctx); !errors.Is(err, ErrTableStopped) || !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("holder's Valid after the stop: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Owner{worker("w"), {ID: "cli", Kind: OwnerCLI}} {
		if _, err := a.Acquire(ctx, "t", o); !errors.Is(err, ErrTableStopped) || !strings.Contains(err.Error(), "walctl table resume --table t") {
			t.Fatalf("%s acquire of a stopped table: %v", o.Kind, err)
		}
	}
	if stops, err := op.Stops(ctx); err != nil || len(stops) != 1 || stops[0].Table != "t" {
		t.Fatalf("stops: %+v, %v", stops, err)
	}
	// Resume: an actor and reason are required; a stale revision changes
	// nothing; the right one lifts the stop and audits it.
	if _, err := op.Resume(ctx, ResumeRequest{Table: "t", Actor: "alice"}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("resume without a reason: %v", err)
	}
	if _, err := op.Resume(ctx, ResumeRequest{Table: "t", Actor: "alice", Reason: "x", ExpectRevision: first.Revision + 100}); !errors.Is(err, ErrStopChanged) {
		t.Fatalf("resume of a stale revision: %v", err)
	}
	res, err := op.Resume(ctx, ResumeRequest{Table: "t", Actor: "alice", Reason: "disk replaced", ExpectRevision: first.Revision})
	if err != nil || res.Stop.Owner.ID != "p1" {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	hist, err := op.Audit(ctx, "t")
	if err != nil || len(hist) != 1 || hist[0].Action != "resume-table" || hist[0].Stop == nil || hist[0].Stop.Owner.ID != "p1" || hist[0].Reason != "disk replaced" {
		t.Fatalf("audit after resume: %+v, %v", hist, err)
	}
	if _, err := op.Resume(ctx, ResumeRequest{Table: "t", Actor: "alice", Reason: "again"}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("resume of a table not stopped: %v", err)
	}
	cl, err := a.Acquire(ctx, "t", worker("w"))
	if err != nil {
		t.Fatalf("acquire after the resume: %v", err)
	}
	release(t, cl)
}
