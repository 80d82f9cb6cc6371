package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
)

// tableDigest is the digest of every row, all columns, of the table's
// latest version, rows hashed by h.
func (e *env) tableDigest(h digest.Hash) digest.Digest {
	e.t.Helper()
	r, err := OpenReaderOn(objstore.NewLocal(e.lance), "orders", Selection{})
	if err != nil {
		e.t.Fatal(err)
	}
	var d digest.Digest
	err = r.Scan(e.ctx, []string{"id", "body", "vec"}, func(b arrow.RecordBatch) error {
		d.Add(h, b)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// The digests a preparation records, summed from the entries it hashed as
// it read them, equal the WAL's own digests of the plan read afresh — in
// both preparation modes, with files that cross generation boundaries. An
// attempt reused without its plan's digests (its preparer stopped before
// recording them) gets them read from the WAL before the commit. The
// entries are large enough for recycled read buffers (poisoned as they
// return, TestMain): the published rows, every column, digest alike. A new
// table's digests are made with the latest row hash, recorded beside them.
func TestPreparedDigestsEqualTheWALsAndAReusedAttemptGetsThem(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffered", true: "streamed"}[streamed], func(t *testing.T) {
			e := newEnv(t, 2)
			e.produce(0, 25, 1500)
			e.produce(1, 9, 2000)
			p := e.publisherWith("w", func(c *Config) { c.PipelinePreparation = streamed; c.Limits.FileBytes = 512 << 10 })
			s, err := p.Acquire(e.ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(context.Background())
			res, err := s.Prepare(e.ctx)
			if err != nil || res.Outcome != OutcomePrepared {
				t.Fatalf("prepare: %+v %v", res, err)
			}
			plans, err := s.store.Plans()
			if err != nil || len(plans) != 1 {
				t.Fatalf("plans: %v %v", plans, err)
			}
			if h, ok, err := s.store.RecordedRowHash(e.ctx); err != nil || !ok || h != digest.Latest {
				t.Fatalf("recorded row hash %d %v %v, want %d", h, ok, err, digest.Latest)
			}
			want, err := ComputeDigests(e.ctx, e.log, plans[0], digest.Latest)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Generations) <= len(plans[0].Ranges) || len(res.Files) <= len(plans[0].Ranges) {
				t.Fatalf("the plan should span several generations and files per shard: %d generations, %d files, %d shards",
					len(want.Generations), len(res.Files), len(plans[0].Ranges))
			}
			recorded := func() *Digests {
				t.Helper()
				all, err := s.store.AllDigests(e.ctx)
				if err != nil || len(all) != 1 {
					t.Fatalf("digest records: %v %v", all, err)
				}
				return all[0]
			}
			if got := recorded(); !reflect.DeepEqual(got, want) {
				t.Fatalf("recorded digests %+v\nthe WAL's %+v", got, want)
			}

			// Without the record, the next round reuses the attempt and
			// reads the digests from the WAL before it commits.
			if err := os.Remove(filepath.Join(e.lance, "orders.lance", digestsDir, res.Plan+".json")); err != nil {
				t.Fatal(err)
			}
			r, err := s.Round(e.ctx)
			if err != nil || r.Outcome != OutcomePublished || !r.Reused {
				t.Fatalf("round: %+v %v", r, err)
			}
			if got := recorded(); !reflect.DeepEqual(got, want) {
				t.Fatalf("digests recorded for the reused attempt %+v\nthe WAL's %+v", got, want)
			}
			drain(t, e.ctx, s)
			e.exactlyOnce(e.tableIDs())
			var all digest.Digest
			for _, g := range want.Generations {
				all = all.Plus(g.Digest)
			}
			if got := e.tableDigest(digest.Latest); got != all {
				t.Fatalf("published rows digest %+v, the WAL's %+v", got, all)
			}
		})
	}
}

// A table an older walctl digested (its records name no row hash, and no
// row hash is recorded) keeps the Canonical hash: the next preparation
// records it and makes its digests with it, so they and the older ones sum
// to the table's rows hashed alike.
func TestATableDigestedByAnOlderWalctlKeepsTheCanonicalHash(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 6, 300)
	p := e.publisher("w")
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	old := []byte(`{"kind": "walctl.digests", "schema_version": 1, "table": "orders", "plan": "0123456789abcdef0123456789abcdef", "generations": []}`)
	dir := filepath.Join(e.lance, "orders.lance", digestsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0123456789abcdef0123456789abcdef.json"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	drain(t, e.ctx, s)
	if h, ok, err := s.store.RecordedRowHash(e.ctx); err != nil || !ok || h != digest.Canonical {
		t.Fatalf("recorded row hash %d %v %v, want %d", h, ok, err, digest.Canonical)
	}
	all, err := s.store.AllDigests(e.ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("digest records: %v %v", all, err)
	}
	var sum digest.Digest
	for _, d := range all {
		if d.RowHash() != digest.Canonical {
			t.Fatalf("plan %s's digests are made with hash %d", d.Plan, d.RowHash())
		}
		for _, g := range d.Generations {
			sum = sum.Plus(g.Digest)
		}
	}
	if got := e.tableDigest(digest.Canonical); got != sum || sum.Rows != 6*300 {
		t.Fatalf("published rows digest %+v, recorded %+v", got, sum)
	}
}

// A row-hash record naming a hash this walctl does not know fails closed:
// nothing is digested (or published) with a guess.
func TestAnUnknownRowHashFailsClosed(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(0, 2, 10)
	rec := []byte(`{"kind": "walctl.row-hash", "schema_version": 1, "table": "orders", "hash": 3}`)
	dir := filepath.Join(e.lance, "orders.lance", "_walctl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "row-hash.json"), rec, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := e.publisher("w").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	_, err = s.Round(e.ctx)
	if !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), "row hash 3") {
		t.Fatalf("round on an unknown row hash: %v", err)
	}
	if ids := e.tableIDs(); len(ids) != 0 {
		t.Fatalf("%d rows published", len(ids))
	}
}
