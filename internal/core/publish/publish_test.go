package publish

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

func TestRoundsPublishEveryEntryOnceAndTrim(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 20, 100)
	e.produce(1, 7, 50)
	s, err := e.publisher("w1").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	if s.Epoch() != 1 {
		t.Fatalf("first epoch = %d", s.Epoch())
	}
	res := drain(t, e.ctx, s)
	if res[0].Outcome != OutcomePublished || len(res[0].Files) < 2 {
		t.Fatalf("first round: %+v", res[0])
	}
	e.exactlyOnce(e.tableIDs())

	st, err := e.log.Stats(e.ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range st.Shards {
		if sh.TrimmedThrough != sh.LastPosition {
			t.Fatalf("shard %d trimmed through %d of %d", sh.Shard, sh.TrimmedThrough, sh.LastPosition)
		}
	}
	// More data later: published on top, still exactly once.
	e.produce(1, 3, 10)
	drain(t, e.ctx, s)
	e.exactlyOnce(e.tableIDs())
}

// The seed's scenario: prepare a real publication, revoke the claim, a
// successor acquires a newer epoch, the old claimant is rejected, and the
// successor reuses the exact prepared files.
func TestRevokedPreparerIsFencedAndSuccessorReusesFiles(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 10, 64)
	e.produce(1, 10, 64)
	a, err := e.publisher("old").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	prep, err := a.Prepare(e.ctx)
	if err != nil || prep.Outcome != OutcomePrepared || len(prep.Files) == 0 {
		t.Fatalf("prepare: %+v %v", prep, err)
	}
	stat := map[string]os.FileInfo{}
	for _, f := range prep.Files {
		fi, err := os.Stat(filepath.Join(e.lance, "orders.lance", f))
		if err != nil {
			t.Fatal(err)
		}
		stat[f] = fi
	}

	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test", Reason: "handover"}); err != nil {
		t.Fatal(err)
	}
	<-a.Claim().Done()
	b, err := e.publisher("new").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background())
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("successor epoch %d not above %d", b.Epoch(), a.Epoch())
	}

	// The old claimant cannot publish.
	if _, err := a.Round(e.ctx); !errors.Is(err, errs.ErrFenced) {
		t.Fatalf("old claimant's round: %v, want fenced", err)
	}
	res, err := b.Round(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomePublished || !res.Adopted || !res.Reused || res.Plan != prep.Plan || res.Attempt != prep.Attempt {
		t.Fatalf("successor round: %+v (prepared %+v)", res, prep)
	}
	for _, f := range res.Files {
		fi, err := os.Stat(filepath.Join(e.lance, "orders.lance", f))
		if err != nil {
			t.Fatal(err)
		}
		if old, ok := stat[f]; !ok || !os.SameFile(old, fi) || !old.ModTime().Equal(fi.ModTime()) {
			t.Fatalf("file %s was not reused as prepared", f)
		}
	}
	drain(t, e.ctx, b)
	e.exactlyOnce(e.tableIDs())
}

// An older owner's fence arriving after the successor's fence is refused.
func TestOlderFenceAfterSuccessorRefused(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 3, 10)
	a, err := e.publisher("old").Acquire(e.ctx, "orders") // epoch 1, not yet fenced
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	b, err := e.publisher("new").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background())
	drain(t, e.ctx, b)
	// Force the old session's fence even though its claim is gone: the
	// table itself refuses it (the claim check is not what protects us).
	a.claim = b.claim
	if err := a.fence(e.ctx); !errors.Is(err, errs.ErrFenced) {
		t.Fatalf("old fence: %v", err)
	}
	e.exactlyOnce(e.tableIDs())
}

func TestDamagedPreparedFilesArePreparedAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		successor bool
		damage    func(path string) error
	}{
		{"deleted-same-owner", false, os.Remove},
		{"flipped-successor", true, func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0xff
			return os.WriteFile(p, b, 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.produce(0, 6, 32)
			a, err := e.publisher("a").Acquire(e.ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			prep, err := a.Prepare(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(filepath.Join(e.lance, "orders.lance", prep.Files[0])); err != nil {
				t.Fatal(err)
			}
			s := a
			if tc.successor {
				if err := a.Release(e.ctx); err != nil {
					t.Fatal(err)
				}
				if s, err = e.publisher("b").Acquire(e.ctx, "orders"); err != nil {
					t.Fatal(err)
				}
			}
			defer s.Release(context.Background())
			res, err := s.Round(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reused || res.Attempt == prep.Attempt || res.Outcome != OutcomePublished {
				t.Fatalf("damaged attempt was reused: %+v", res)
			}
			for _, f := range res.Files {
				for _, old := range prep.Files {
					if f == old {
						t.Fatalf("published a damaged attempt's file %s", f)
					}
				}
			}
			e.exactlyOnce(e.tableIDs())
		})
	}
}

// A table whose latest version is rolled back below the WAL's trimmed point
// makes planning fail, naming both positions.
func TestRolledBackTableFailsLoudly(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 4, 10)
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	res := drain(t, e.ctx, s)
	published := res[0].Version
	// Restore an old copy: drop every version from the publication on.
	versions, err := s.ds.Versions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if v.Version >= published {
			if err := os.Remove(v.Path); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.produce(0, 1, 10)
	_, err = s.Round(e.ctx)
	if !errors.Is(err, ErrWatermarkBehindTrim) || !strings.Contains(err.Error(), "latest watermark 0") || !strings.Contains(err.Error(), "trimmed-through position 4") {
		t.Fatalf("round on a rolled-back table: %v", err)
	}
}

func TestAcquireUnknownTableAndBusy(t *testing.T) {
	e := newEnv(t, 1)
	if _, err := e.publisher("x").Acquire(e.ctx, "nope"); !errors.Is(err, wal.ErrUnknownTable) {
		t.Fatalf("unknown table: %v", err)
	}
	if _, err := e.publisher("x").Acquire(e.ctx, "../x"); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("hostile name: %v", err)
	}
	a, err := e.publisher("a").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	if _, err := e.publisher("b").Acquire(e.ctx, "orders"); !errors.Is(err, coord.ErrClaimed) {
		t.Fatalf("second acquirer: %v", err)
	}
}

// Issue 31: a descriptor set found under a plan's key is reused only if it
// is that plan's: its plan id and its files' WAL ranges. One that is not
// (a record of another plan, a range rewritten) is retired, and the round
// prepares anew instead of publishing files for positions they may not
// hold.
func TestDescriptorSetOfAnotherPlanIsNotReused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(rec map[string]any)
	}{
		{"plan-id", func(rec map[string]any) { rec["plan"] = "another-plan" }},
		{"range", func(rec map[string]any) {
			r := rec["files"].([]any)[0].(map[string]any)["range"].(map[string]any)
			r["to"] = r["to"].(float64) - 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.produce(0, 4, 16)
			s, err := e.publisher("a").Acquire(e.ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(context.Background())
			prep, err := s.Prepare(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := filepath.Glob(filepath.Join(e.lance, "orders.lance", attemptsDir, "*", prep.Attempt+".json"))
			if err != nil || len(recs) != 1 {
				t.Fatalf("descriptor set record: %v %v", recs, err)
			}
			raw, err := os.ReadFile(recs[0])
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]any
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatal(err)
			}
			tc.tamper(rec)
			if raw, err = json.Marshal(rec); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(recs[0], raw, 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := s.Round(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reused || res.Attempt == prep.Attempt || res.Outcome != OutcomePublished {
				t.Fatalf("a descriptor set that is not the plan's was reused: %+v", res)
			}
			e.exactlyOnce(e.tableIDs())
		})
	}
}

// Issue 31: a fence that wins on its last allowed attempt has fenced the
// table; it used to report "still contended" (with one attempt allowed,
// every first fence failed).
func TestFenceWonOnTheLastAttemptIsAFence(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 2, 10)
	p := New(e.log, e.co, Config{
		LanceRoot: e.lance, CommitAttempts: 1,
		Owner:  coord.Owner{ID: "w", Kind: coord.OwnerWorker},
		Limits: Limits{MaxBytes: 1 << 30, MaxGenerations: 1000, FileBytes: 128 << 10},
	})
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	res, err := s.Round(e.ctx)
	if err != nil || res.Outcome != OutcomePublished {
		t.Fatalf("round with one commit attempt: %+v, %v; want published", res, err)
	}
	e.exactlyOnce(e.tableIDs())
}
