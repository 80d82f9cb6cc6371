package publish

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// replaceRecord puts another record under path (write beside, rename over
// it), as a concurrent retire-and-pin would leave it; it returns its bytes.
func replaceRecord(t *testing.T, path string, edit func(map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	edit(rec)
	out, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(want) {
		t.Fatalf("%s: %v, want the record left in place", path, err)
	}
}

// Rule 8: a plan or an attempt is retired only if its record is still the
// one read (here another record with the same id took its name), and only
// under the claim (here revoked).
func TestRetirementComparesTheRecordAndNeedsTheClaim(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 4, 10)
	a, err := e.publisher("a").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	prep, err := a.Prepare(e.ctx)
	if err != nil || prep.Outcome != OutcomePrepared {
		t.Fatalf("prepare: %+v %v", prep, err)
	}
	plans, err := a.store.Plans()
	if err != nil || len(plans) != 1 {
		t.Fatalf("plans: %v %v", plans, err)
	}
	read := plans[0]
	planPath := a.store.st.Join(plansDir + "/" + read.Key() + ".json")
	retired := a.store.st.Join(plansDir + "/retired/" + read.ID + ".json")
	other := replaceRecord(t, planPath, func(r map[string]any) { r["created_by"] = "someone else" })
	if err := a.store.RetirePlan(e.ctx, read, a.guard); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("retire a replaced plan: %v, want a conflict", err)
	}
	wantContent(t, planPath, other)
	if _, err := os.Stat(retired); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("retired name after a refused retirement: %v", err)
	}

	atts, err := a.store.Attempts(read.ID)
	if err != nil || len(atts) != 1 {
		t.Fatalf("attempts: %v %v", atts, err)
	}
	attPath := a.store.st.Join(attemptsDir + "/" + read.ID + "/" + atts[0].Attempt + ".json")
	otherAtt := replaceRecord(t, attPath, func(r map[string]any) { r["prepared_by"] = "someone else" })
	if err := a.store.RetireAttempt(e.ctx, atts[0], a.guard); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("retire a replaced attempt: %v, want a conflict", err)
	}
	wantContent(t, attPath, otherAtt)

	// The claim revoked: nothing is retired, whatever the record says.
	plans, _ = a.store.Plans()
	atts, _ = a.store.Attempts(read.ID)
	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test", Reason: "rule 8"}); err != nil {
		t.Fatal(err)
	}
	<-a.Claim().Done()
	if err := a.store.RetirePlan(e.ctx, plans[0], a.guard); !errors.Is(err, errs.ErrFenced) {
		t.Fatalf("retire a plan without the claim: %v", err)
	}
	if err := a.store.RetireAttempt(e.ctx, atts[0], a.guard); !errors.Is(err, errs.ErrFenced) {
		t.Fatalf("retire an attempt without the claim: %v", err)
	}
	wantContent(t, planPath, other)
	wantContent(t, attPath, otherAtt)

	// The successor adopts the pinned record and retires it once published.
	b, err := e.publisher("b").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background())
	drain(t, e.ctx, b)
	e.exactlyOnce(e.tableIDs())
	if _, err := os.Stat(planPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("published plan still pinned: %v", err)
	}
	wantContent(t, retired, other)
}

// Planning checks watermark ≤ last WAL position (issue 12 item 5): a WAL
// restored from an older backup would re-issue positions the table already
// covers, and their entries would be skipped.
func TestWALRestoredFromOlderBackupFailsLoudly(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 2, 10)
	backup := t.TempDir()
	e.reopenWAL(func(dir string) {
		if err := os.CopyFS(backup, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
	})
	e.produce(0, 3, 10)
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e.ctx, s)
	if err := s.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.reopenWAL(func(dir string) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(dir, os.DirFS(backup)); err != nil {
			t.Fatal(err)
		}
	})
	e.produce(0, 1, 10) // position 3 again, a different entry
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrWatermarkAheadOfWAL) || !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrWatermarkAheadOfWAL", what, err)
		}
		for _, want := range []string{"table orders shard 0", "latest watermark 5", "last position 3"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %q does not say %q", what, err, want)
			}
		}
	}
	s2, err := e.publisher("w2").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release(context.Background())
	_, err = s2.Round(e.ctx)
	check("round", err)
	if err := s2.p.stopped.check("orders"); err != nil {
		t.Fatalf("an integrity error stopped the table like a storage failure: %v", err)
	}
	// The plan builder refuses on its own too.
	_, err = BuildPlan("orders", Watermarks{0: 5}, []Pending{{Shard: 0, Watermark: 5, LastPosition: 3}}, Limits{MaxBytes: 1, MaxGenerations: 1, FileBytes: 1})
	check("BuildPlan", err)
}

// Issue 13: a publish that finds nothing does not advance the epoch nor
// write a fence version, and says how much is waiting to be sealed; once
// sealed, the same session advances, fences and publishes (rules 3, 4, 10).
func TestNothingToPublishNeitherAdvancesNorFences(t *testing.T) {
	e := newEnv(t, 2)
	e.appendOpen(1, 3, 10)
	walEpoch := func() uint64 {
		ep, err := e.log.Epoch(e.ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	res, err := s.Round(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeIdle || res.UnsealedEntries != 3 || res.UnsealedGenerations != 1 || res.Epoch != 0 {
		t.Fatalf("idle round: %+v", res)
	}
	if ep := walEpoch(); ep != 0 || s.Epoch() != 0 {
		t.Fatalf("WAL epoch %d, session %d after finding nothing", ep, s.Epoch())
	}
	if _, err := os.Stat(s.p.TablePath("orders")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a table with nothing published was created: %v", err)
	}

	if _, err := e.log.Seal(e.ctx, "orders", 1); err != nil {
		t.Fatal(err)
	}
	res, err = s.Round(e.ctx)
	if err != nil || res.Outcome != OutcomePublished || res.Epoch != 1 || walEpoch() != 1 {
		t.Fatalf("round after the seal: %+v %v (WAL epoch %d)", res, err, walEpoch())
	}
	if err := s.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	latest := func() uint64 {
		v, err := s.ds.LatestVersion()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := latest()

	// A later one-shot publish with nothing pending: no epoch, no version.
	s2, err := e.publisher("cli").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release(context.Background())
	if res, err := s2.Round(e.ctx); err != nil || res.Outcome != OutcomeIdle || res.UnsealedEntries != 0 {
		t.Fatalf("idle round: %+v %v", res, err)
	}
	if v := latest(); v != before || walEpoch() != 1 {
		t.Fatalf("version %d (was %d), WAL epoch %d after an idle publish", v, before, walEpoch())
	}
	e.exactlyOnce(e.tableIDs())
}

// A creator killed between the dataset's directories and its version 1
// (found by the chaos harness: a catch-up executor SIGKILLed while creating
// its table) leaves a skeleton; the next publisher finishes the creation
// instead of failing on "no versions" for ever.
func TestSkeletonOfACrashedCreatorIsFinished(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 3, 10)
	root := e.publisher("w").TablePath("orders")
	for _, d := range []string{"_versions", "data", "_walctl/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	drain(t, e.ctx, s)
	e.exactlyOnce(e.tableIDs())
}

// Damage is contained to its shard (rule 18, issue 13 item 3): a damaged
// generation stops publication of its own shard only; the other shards are
// published, and once only the damage is left the round fails loudly (exit
// 6) naming the file, never skipping it.
func TestDamagedShardStopsOnlyItself(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 3, 10)
	damagedIDs := maps.Clone(e.acked)
	e.produce(1, 3, 10)
	var data string
	e.reopenWAL(func(dir string) {
		m, err := filepath.Glob(filepath.Join(dir, "tables", "orders", "shard-0000", "gen-*.arrows"))
		if err != nil || len(m) == 0 {
			t.Fatalf("shard 0's generation files: %v %v", m, err)
		}
		data = m[0]
		b, err := os.ReadFile(data)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) / 2; i < len(b)/2+32; i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(data, b, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	var last error
	for i := 0; i < 20 && last == nil; i++ {
		_, last = s.Round(e.ctx)
	}
	if !errors.Is(last, errs.ErrCorrupt) || !strings.Contains(last.Error(), data) {
		t.Fatalf("the round left with only damaged work: %v, want an integrity error naming %s", last, data)
	}
	got := map[int64]int{}
	for _, id := range e.tableIDs() {
		got[id]++
	}
	for id := range e.acked {
		if _, bad := damagedIDs[id]; bad {
			if got[id] != 0 {
				t.Fatalf("id %d of the damaged shard was published", id)
			}
		} else if got[id] != 1 {
			t.Fatalf("id %d of the healthy shard appears %d times", id, got[id])
		}
	}
}
