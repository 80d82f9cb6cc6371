package publish

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/wal"
)

// recordSeeds are a plan and its descriptor set as the writer records them.
func recordSeeds(t testing.TB) (plan, prepared []byte) {
	gens := func(first uint64, n int) []wal.Generation {
		var out []wal.Generation
		for i := range n {
			f := first + uint64(3*i)
			out = append(out, wal.Generation{ID: f, First: f, Last: f + 2, Entries: 3, Bytes: 300, Sealed: true})
		}
		return out
	}
	p, err := BuildPlan("orders", Watermarks{0: 0, 1: 6}, []Pending{
		{Shard: 0, LastPosition: 9, Generations: gens(1, 3)},
		{Shard: 1, Watermark: 6, TrimmedThrough: 6, LastPosition: 15, Generations: gens(7, 3)},
	}, Limits{MaxBytes: 1 << 20, MaxGenerations: 10, FileBytes: 500})
	if err != nil || p == nil {
		t.Fatalf("plan: %v", err)
	}
	now := time.Unix(1700000000, 0).UTC()
	p.ID, p.CreatedBy, p.CreatedAt, p.PlannedOnVersion = planID(p.Key(), now), "w", now, 3
	prep := &Prepared{Kind: KindPrepared, SchemaVersion: recordSchema, Plan: p.ID, Attempt: "0123456789abcdef", PreparedBy: "w", PreparedAt: now}
	for i, f := range p.Files {
		prep.Files = append(prep.Files, PreparedFile{Range: f, Descriptor: lance.Descriptor{
			Path: "data/walctl-x-" + string(rune('a'+i)) + ".lance", Size: 1234, Rows: 10, Checksum: "crc32c:0badf00d",
			FileMajor: 2, FileMinor: 0, FieldIDs: []int32{0, 1, 2}}})
	}
	if plan, err = json.MarshalIndent(p, "", "  "); err != nil {
		t.Fatal(err)
	}
	if prepared, err = json.MarshalIndent(prep, "", "  "); err != nil {
		t.Fatal(err)
	}
	return plan, prepared
}

// FuzzPlanRecord decodes garbage as a pinned plan, as adoption does: no
// panic, a refusal is errs.ErrCorrupt, and a plan that is accepted
// re-encodes to the same plan and can be judged against any watermarks.
func FuzzPlanRecord(f *testing.F) {
	plan, _ := recordSeeds(f)
	f.Add(plan)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Plan
		if err := decodeRecord(data, KindPlan, &p); err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("unclassified refusal: %v", err)
			}
			return
		}
		p.Key()
		p.Bytes()
		for _, w := range []Watermarks{p.Start, p.End(), {}} {
			p.Standing(w)
		}
		if p.Standing(p.Start) != StandingPublishable || p.Standing(p.End()) != StandingPublished {
			t.Fatalf("an accepted plan does not start at its start or end at its end: %+v", p)
		}
		again, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		var q Plan
		if err := decodeRecord(again, KindPlan, &q); err != nil || !reflect.DeepEqual(normal(p), normal(q)) {
			t.Fatalf("an accepted plan does not re-encode to itself: %v\n%+v\n%+v", err, p, q)
		}
	})
}

// normal drops what JSON does not keep apart (nil and empty maps, the
// monotonic clock).
func normal(p Plan) Plan {
	p.src = recordSource{}
	if len(p.Start) == 0 {
		p.Start = nil
	}
	p.CreatedAt = p.CreatedAt.Round(0)
	return p
}

// FuzzPreparedRecord decodes garbage as a descriptor set, as reuse and
// verification do: no panic, a refusal is errs.ErrCorrupt, and an accepted
// set names only safe ids and well-formed ranges.
func FuzzPreparedRecord(f *testing.F) {
	_, prepared := recordSeeds(f)
	f.Add(prepared)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Prepared
		if err := decodeRecord(data, KindPrepared, &p); err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("unclassified refusal: %v", err)
			}
			return
		}
		if !recordID.MatchString(p.Attempt) || !recordID.MatchString(p.Plan) || len(p.Descriptors()) != len(p.Files) {
			t.Fatalf("accepted a descriptor set with unsafe ids: %q %q", p.Plan, p.Attempt)
		}
	})
}
