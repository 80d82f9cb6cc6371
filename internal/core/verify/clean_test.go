package verify

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/publish"
)

func (e *env) session(clk clock.Clock) *publish.Session {
	e.t.Helper()
	p := publish.New(e.log, e.co, publish.Config{LanceRoot: e.lance,
		Owner:  coord.Owner{ID: "ops", Kind: coord.OwnerCLI, Host: "h", PID: 1},
		Limits: publish.Limits{FileBytes: 16 << 10}, Clock: clk})
	s, err := p.Acquire(e.ctx, "t")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Release(context.Background()) })
	return s
}

// Issue 17: walctl's compaction, then `table clean` of everything older
// than now (an hour later: clean keeps what is younger than twice the claim
// TTL). Clean removes the old versions and the files only they
// referenced, keeps the files of a pinned, prepared plan, and the official
// reader reads every retained version; the audit still names a deleted
// record and a duplicate by shard and position, through the compaction's
// lineage record (the published files it merged are gone).
func TestCompactCleanThenAudit(t *testing.T) {
	o := oracletest.MustFind(t)
	e := newEnv(t)
	for i := 0; i < 4; i++ {
		e.produce(i%2, 3, 20)
		e.publishAll(false)
	}
	root := filepath.Join(e.lance, "t.lance")
	dup, gone := e.rowAt(0, 5), e.rowAt(3, 11)
	s := e.session(nil)
	cres, err := s.Compact(e.ctx, 1<<20)
	if err != nil || len(cres.Groups) == 0 {
		t.Fatalf("compact: %+v %v", cres, err)
	}
	e.produce(1, 2, 20)
	prep, err := s.Prepare(e.ctx) // pinned and prepared, not committed
	if err != nil || prep.Outcome != publish.OutcomePrepared {
		t.Fatalf("prepare: %+v %v", prep, err)
	}
	_ = s.Release(e.ctx)
	// `table clean` is an ownership of its own: it fences, and keeps the
	// latest two versions (its fence and the compaction below it).
	clk := clocktesting.NewFakeClock(time.Now())
	c := e.session(clk)
	if res, err := c.Clean(e.ctx, time.Hour); err != nil || len(res.VersionsRemoved)+len(res.FilesRemoved)+len(res.RecordsRemoved) != 0 {
		t.Fatalf("clean of nothing older than an hour: %+v %v", res, err)
	}
	clk.Step(time.Hour)
	res, err := c.Clean(e.ctx, 0)
	if err != nil || len(res.VersionsRemoved) == 0 || len(res.FilesRemoved) == 0 || res.VersionsKept != 2 {
		t.Fatalf("clean: %+v %v", res, err)
	}
	_ = c.Release(e.ctx)
	for _, f := range res.FilesRemoved {
		for _, p := range prep.Files {
			if f == p {
				t.Fatalf("clean removed %s of the pinned plan's prepared attempt", f)
			}
		}
	}
	ds, err := lance.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := ds.Versions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		d, err := o.Dump(e.ctx, root, oracle.DumpOptions{Version: v.Version, Columns: []string{"id"}})
		if err != nil {
			t.Fatalf("official reader, retained version %d after clean: %v", v.Version, err)
		}
		if d.NumRows != 240 {
			t.Fatalf("version %d: %d rows", v.Version, d.NumRows)
		}
	}
	// The prepared attempt is reused after the clean: its files are there.
	r, err := e.session(nil).Round(e.ctx)
	if err != nil || r.Outcome != publish.OutcomePublished || !r.Reused {
		t.Fatalf("publish after clean: %+v %v", r, err)
	}
	if rep := e.verify(); !rep.OK || rep.ComparedDigest != 280 {
		t.Fatalf("after compact and clean: %+v", rep)
	}
	if _, err := o.Append(e.ctx, root, []map[string]any{dup.values}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(e.ctx, root, fmt.Sprintf("id = %d", gone.values["id"])); err != nil {
		t.Fatal(err)
	}
	wantProblems(t, e.verify(), Problem{Kind: KindDuplicated, Shard: dup.shard, From: dup.position},
		Problem{Kind: KindMissing, Shard: gone.shard, From: gone.position})
}
