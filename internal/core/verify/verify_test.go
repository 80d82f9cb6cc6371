package verify

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/stack"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
}, nil)

type env struct {
	t     *testing.T
	ctx   context.Context
	log   *wal.Engine
	co    *coord.Client
	lance string
	gen   *synth.Generator
}

func newEnv(t *testing.T) *env {
	st := stack.Start(t, 2*time.Minute, wal.Options{MaxGenerationAge: -1, MaxGenerationBytes: 32 << 10})
	ctx, log := st.Ctx, st.WAL
	co := st.Coord(t, coord.Config{ClaimTTL: 5 * time.Second})
	if _, err := log.CreateTable(ctx, "t", schema, 2); err != nil {
		t.Fatal(err)
	}
	gen, err := synth.New(schema, 3)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, log: log, co: co, lance: st.LanceRoot, gen: gen}
}

func (e *env) produce(shard, n, rows int) {
	for i := 0; i < n; i++ {
		b := e.gen.Batch(rows)
		if _, err := e.log.Append(e.ctx, "t", shard, b); err != nil {
			e.t.Fatal(err)
		}
		b.Release()
	}
	if _, err := e.log.Seal(e.ctx, "t", shard); err != nil {
		e.t.Fatal(err)
	}
}

// publishAll publishes everything sealed; with retain, the WAL is not
// trimmed (each round fails right after its commit), so verification
// compares rows.
func (e *env) publishAll(retain bool) {
	if retain {
		if err := failpoint.Enable(failpoint.AfterCommitBeforeTrim+"=error", ""); err != nil {
			e.t.Fatal(err)
		}
		defer failpoint.Reset()
	}
	p := publish.New(e.log, e.co, publish.Config{LanceRoot: e.lance,
		Owner:  coord.Owner{ID: "test", Kind: coord.OwnerCLI, Host: "h", PID: 1},
		Limits: publish.Limits{FileBytes: 16 << 10}})
	s, err := p.Acquire(e.ctx, "t")
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Release(context.Background())
	for {
		r, err := s.Round(e.ctx)
		if retain && errors.Is(err, failpoint.ErrInjected) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		if r.Outcome == publish.OutcomeIdle {
			return
		}
	}
}

func (e *env) verify() *Report {
	e.t.Helper()
	rep, err := Table(e.ctx, e.log, Options{LanceRoot: e.lance, Table: "t"})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func TestCleanTableVerifies(t *testing.T) {
	e := newEnv(t)
	e.produce(0, 8, 50)
	e.produce(1, 5, 30)
	e.publishAll(false)
	e.produce(0, 3, 20) // sealed, not published: above the watermark
	rep := e.verify()
	if !rep.OK || rep.Err() != nil || rep.TableRows != 8*50+5*30 || rep.Fragments < 2 {
		t.Fatalf("clean table: %+v", rep)
	}
	if rep.Shards[0].PendingEntries != 3 || rep.Shards[0].DigestThrough != rep.Shards[0].Watermark || rep.ComparedDigest != 8*50+5*30 {
		t.Fatalf("shard 0: %+v", rep.Shards[0])
	}
}

// Each alteration of a correct table must be reported, and wrap
// errs.ErrCorrupt (exit code 6).
func TestAlteredTablesFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		retain bool
		alter  func(t *testing.T, e *env, ds *lance.Dataset, files []publish.PreparedFile)
		kind   string
	}{
		{"duplicated-fragment", false, func(t *testing.T, e *env, ds *lance.Dataset, files []publish.PreparedFile) {
			m, err := ds.Latest()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ds.Commit(e.ctx, lance.CommitRequest{ParentVersion: m.Version, Kind: lance.Append, Files: []lance.Descriptor{files[0].Descriptor}}); err != nil {
				t.Fatal(err)
			}
		}, KindDuplicated},
		{"duplicated-fragment-retained", true, dupFragment, KindDuplicated},
		{"swapped-file-and-descriptor-retained", true, swapFilesAndDescriptors, KindMissing},
		{"swapped-file-content", false, func(t *testing.T, e *env, ds *lance.Dataset, files []publish.PreparedFile) {
			// Two files of equal row counts: the table stays readable, its
			// content is wrong.
			var a, b string
			for i := range files {
				for j := range files {
					if i != j && a == "" && files[i].Descriptor.Rows == files[j].Descriptor.Rows {
						a, b = filepath.Join(ds.Root(), files[i].Descriptor.Path), filepath.Join(ds.Root(), files[j].Descriptor.Path)
					}
				}
			}
			if a == "" {
				t.Fatalf("no two files of equal row counts: %+v", files)
			}
			data, err := os.ReadFile(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(a, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, KindDamagedFile},
		{"rolled-back-version", false, func(t *testing.T, e *env, ds *lance.Dataset, files []publish.PreparedFile) {
			vs, err := ds.Versions()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(vs[len(vs)-1].Path); err != nil {
				t.Fatal(err)
			}
		}, KindMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.produce(0, 16, 40)
			e.produce(1, 16, 40)
			e.publishAll(tc.retain)
			if rep := e.verify(); !rep.OK {
				t.Fatalf("before: %+v", rep)
			}
			root := filepath.Join(e.lance, "t.lance")
			ds, err := lance.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			atts, err := publish.NewStore(root).AllAttempts()
			if err != nil || len(atts) == 0 {
				t.Fatal(atts, err)
			}
			var files []publish.PreparedFile
			for _, a := range atts {
				files = append(files, a.Files...)
			}
			if len(files) < 2 {
				t.Fatalf("want 2+ files, have %d", len(files))
			}
			tc.alter(t, e, ds, files)
			rep, err := Table(e.ctx, e.log, Options{LanceRoot: e.lance, Table: "t"})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || p.Kind == tc.kind
			}
			if rep.OK || !found || !errors.Is(rep.Err(), errs.ErrCorrupt) {
				t.Fatalf("altered table: ok=%v problems=%+v", rep.OK, rep.Problems)
			}
		})
	}
}

func dupFragment(t *testing.T, e *env, ds *lance.Dataset, files []publish.PreparedFile) {
	m, err := ds.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Commit(e.ctx, lance.CommitRequest{ParentVersion: m.Version, Kind: lance.Append, Files: []lance.Descriptor{files[0].Descriptor}}); err != nil {
		t.Fatal(err)
	}
}

// swapFilesAndDescriptors copies one file over another of equal row count
// and makes the first one's descriptor match the copy: the files verify,
// and only the row comparison with the retained WAL can tell.
func swapFilesAndDescriptors(t *testing.T, e *env, ds *lance.Dataset, files []publish.PreparedFile) {
	for i := range files {
		for j := range files {
			if i != j && files[i].Descriptor.Rows == files[j].Descriptor.Rows {
				data, err := os.ReadFile(filepath.Join(ds.Root(), files[j].Descriptor.Path))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ds.Root(), files[i].Descriptor.Path), data, 0o644); err != nil {
					t.Fatal(err)
				}
				records, _ := filepath.Glob(filepath.Join(ds.Root(), "_walctl", "attempts", "*", "*.json"))
				for _, rec := range records {
					b, err := os.ReadFile(rec)
					if err != nil {
						t.Fatal(err)
					}
					var p publish.Prepared
					if err := json.Unmarshal(b, &p); err != nil {
						t.Fatal(err)
					}
					for k := range p.Files {
						if p.Files[k].Descriptor.Path == files[i].Descriptor.Path {
							p.Files[k].Descriptor.Size, p.Files[k].Descriptor.Checksum = files[j].Descriptor.Size, files[j].Descriptor.Checksum
						}
					}
					if b, err = json.MarshalIndent(p, "", "  "); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(rec, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
		}
	}
	t.Fatalf("no two files of equal rows and size: %+v", files)
}

// Issue 17: with the WAL trimmed, the audit compares the table with the
// digests recorded beside the plans, and says how many records it compared
// each way; with the WAL retained it compares them record by record.
func TestReportSaysWhatWasCompared(t *testing.T) {
	e := newEnv(t)
	e.produce(0, 4, 25)
	e.publishAll(false) // trimmed
	rep := e.verify()
	if !rep.OK || rep.ComparedWAL != 0 || rep.ComparedDigest != 100 || rep.ForeignRows != 0 ||
		rep.Shards[0].DigestThrough != 4 || rep.Shards[0].DigestRecords != 100 || rep.Shards[1].DigestThrough != 0 {
		t.Fatalf("trimmed: %+v", rep)
	}
	if sum := rep.Summary(); !strings.Contains(sum, "compared 0 records with the WAL, 100 by digest, 0 foreign rows") {
		t.Fatalf("summary: %q", sum)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"compared_wal":0`, `"compared_digest":100`, `"foreign_rows":0`, `"digest_through":4`} {
		if !strings.Contains(string(raw), key) {
			t.Fatalf("JSON lacks %s: %s", key, raw)
		}
	}

	e.produce(1, 2, 10)
	e.publishAll(true) // retained
	rep = e.verify()
	if !rep.OK || rep.ComparedWAL != 20 || rep.ComparedDigest != 100 || rep.Shards[1].WALEntries != 2 {
		t.Fatalf("partly retained: %+v", rep)
	}
	if sum := rep.Summary(); !strings.Contains(sum, "compared 20 records with the WAL, 100 by digest, 0 foreign rows: no missing or duplicated records") {
		t.Fatalf("summary: %q", sum)
	}
}

// A table's digests are compared with its rows hashed by the table's row
// hash. A digest record made with another (an older walctl's, during an
// upgrade) is not compared: its positions are reported as without a digest,
// naming why, never as unexpected content.
func TestDigestsOfAnotherRowHashAreNotCompared(t *testing.T) {
	e := newEnv(t)
	e.produce(0, 4, 25)
	e.publishAll(false)
	e.produce(0, 3, 10)
	e.publishAll(false)
	rep := e.verify()
	if !rep.OK || rep.RowHash != digest.Latest || rep.ComparedDigest != 130 {
		t.Fatalf("before: %+v", rep)
	}
	dir := filepath.Join(e.lance, "t.lance", "_walctl", "digests")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 2 {
		t.Fatalf("digest records: %v %v", entries, err)
	}
	edited := 0
	for _, en := range entries {
		p := filepath.Join(dir, en.Name())
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		if rec["hash"] != float64(digest.Latest) {
			t.Fatalf("%s names row hash %v", en.Name(), rec["hash"])
		}
		if gens := rec["generations"].([]any); gens[0].(map[string]any)["from"] == float64(5) {
			delete(rec, "hash") // as an older walctl wrote it
			raw, _ = json.Marshal(rec)
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			edited++
		}
	}
	if edited != 1 {
		t.Fatalf("%d records start at position 5", edited)
	}
	rep = e.verify()
	if rep.OK || rep.Unexpected != 0 || len(rep.Problems) != 1 {
		t.Fatalf("after: %+v", rep)
	}
	p := rep.Problems[0]
	if p.Kind != KindNoDigest || p.Shard != 0 || p.From != 5 || p.To != 7 || !strings.Contains(p.Detail, "no digest made with the table's row hash 2 (1 digest record(s) made with another") {
		t.Fatalf("problem: %+v", p)
	}
}
