package exactlyonce

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

// Each test below plants one violation that the fault harnesses' checkers
// of before issue 30 let pass. The old rule is kept as a small local
// predicate, shown to accept the planted data, and the new check is shown
// to reject it (and to accept the same data without the violation).

// ids returns the ids [first, end).
func ids(first, end int64) []int64 {
	var out []int64
	for id := first; id < end; id++ {
		out = append(out, id)
	}
	return out
}

// batchOf is a record batch of the given ids.
func batchOf(ids []int64) arrow.RecordBatch {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(ids, nil)
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: synth.IDField, Type: arrow.PrimitiveTypes.Int64}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(ids)))
}

// ledgerOf builds a ledger: acks ACKed in order, then failed appends.
func ledgerOf(t *testing.T, acks []Ack, failed map[Range]error) *Ledger {
	l := NewLedger()
	for _, a := range acks {
		l.Record(a.Shard, a.IDs, a.Pos, nil)
		b := batchOf(ids(a.IDs.First, a.IDs.End))
		if err := l.Acked.Add(b); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	for r, err := range failed {
		l.Record(0, r, 0, err)
	}
	return l
}

// oldUnknownRule is the harnesses' old table check: lost and duplicated
// ids fail; an id that was never ACKed passes if any failed append (of
// whatever error) made it.
func oldUnknownRule(table []int64, acked map[int64]bool, failed []Range) error {
	r := Check(table, acked)
	if len(r.Missing) > 0 || len(r.Duplicated) > 0 {
		return r.Err()
	}
	for _, id := range r.Unacked {
		if !newRangeSet(failed).has(id) {
			return fmt.Errorf("id %d never appended", id)
		}
	}
	return nil
}

func TestPlantedRefusedAppendInTable(t *testing.T) {
	for _, tc := range []struct {
		err       error
		uncertain bool
	}{
		{fmt.Errorf("append: %w", walflight.ErrServerUnavailable), true},
		{fmt.Errorf("shard stopped: %w", wal.ErrIO), true},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("call: %w", context.Canceled), true},
		{fmt.Errorf("bad batch: %w", wal.ErrSchemaMismatch), false},
		{fmt.Errorf("gap: %w", errs.ErrFenced), false},
		{fmt.Errorf("x: %w", wal.ErrUnknownTable), false},
		{fmt.Errorf("x: %w", errs.ErrConflict), false},
		{fmt.Errorf("x: %w", errs.ErrCorrupt), false},
		{errors.New("no category"), false},
	} {
		if got := Uncertain(tc.err); got != tc.uncertain {
			t.Errorf("Uncertain(%v) = %v, want %v", tc.err, got, tc.uncertain)
		}
	}
	acks := []Ack{{0, 1, Range{1, 5}}}
	refused := Range{5, 9}
	l := ledgerOf(t, acks, map[Range]error{refused: fmt.Errorf("refused: %w", wal.ErrSchemaMismatch)})
	table := ids(1, 9) // the refused batch made it into the table
	if err := oldUnknownRule(table, l.Acked.Snapshot(), []Range{refused}); err != nil {
		t.Fatalf("the old rule should pass the planted violation: %v", err)
	}
	v := l.Judge(table)
	if len(v.Refused) != 4 || !strings.Contains(strings.Join(v.Problems(), "\n"), "refused") {
		t.Fatalf("the new check passes a refused append found in the table: %+v", v.Problems())
	}
	if p := l.Judge(ids(1, 5)).Problems(); len(p) != 0 {
		t.Fatalf("without the violation: %v", p)
	}
}

func TestPlantedHalfVisibleBatch(t *testing.T) {
	acks := []Ack{{0, 1, Range{1, 5}}}
	unknown := Range{10, 20}
	l := ledgerOf(t, acks, map[Range]error{unknown: walflight.ErrServerUnavailable})
	table := append(ids(1, 5), ids(10, 15)...) // half of the unknown batch
	// chaos checked only lost, duplicated and never-appended ids.
	if err := oldUnknownRule(table, l.Acked.Snapshot(), []Range{unknown}); err != nil {
		t.Fatalf("the old rule should pass the planted violation: %v", err)
	}
	if v := l.Judge(table); len(v.HalfVisible) != 1 {
		t.Fatalf("the new check passes a half-visible batch: %v", v.Problems())
	}
	for _, whole := range [][]int64{ids(1, 5), append(ids(1, 5), ids(10, 20)...)} {
		if p := l.Judge(whole).Problems(); len(p) != 0 {
			t.Fatalf("an unknown batch absent or whole is fine: %v", p)
		}
	}
}

// oldLatestOnly is the harnesses' old audit of versions: exactly once in
// the latest version, epochs never decreasing.
func oldLatestOnly(vs []Version, acked map[int64]bool) error {
	for i := 1; i < len(vs); i++ {
		if vs[i].Epoch < vs[i-1].Epoch {
			return errors.New("epoch decreased")
		}
	}
	return Check(vs[len(vs)-1].IDs, acked).Err()
}

func TestPlantedViolationInAnOlderVersion(t *testing.T) {
	acks := []Ack{{0, 1, Range{1, 4}}, {0, 2, Range{4, 7}}, {1, 1, Range{7, 9}}}
	l := ledgerOf(t, acks, nil)
	wm := func(s0, s1 uint64) map[int]uint64 { return map[int]uint64{0: s0, 1: s1} }
	good := []Version{
		{Number: 1, Epoch: 1, Watermarks: wm(0, 0)},
		{Number: 2, Epoch: 1, IDs: ids(1, 4), Watermarks: wm(1, 0)},
		{Number: 3, Epoch: 2, IDs: ids(1, 7), Watermarks: wm(2, 0)},
		// compaction: the same ids in other files, in another order
		{Number: 4, Epoch: 2, IDs: []int64{6, 5, 4, 3, 2, 1}, Watermarks: wm(2, 0)},
		{Number: 5, Epoch: 2, IDs: ids(1, 9), Watermarks: wm(2, 1)},
	}
	if p := l.AuditVersions(good); len(p) != 0 {
		t.Fatalf("a correct history: %v", p)
	}
	for _, tc := range []struct {
		name  string
		plant func(vs []Version)
		want  string
	}{
		{"duplicate in an older version", func(vs []Version) { vs[2].IDs = append(ids(1, 7), 3) }, "appears 2 times"},
		{"id dropped then back", func(vs []Version) { vs[3].IDs = ids(1, 6) }, "dropped id 6"},
		{"watermark down then up", func(vs []Version) { vs[3].Watermarks = wm(1, 0) }, "watermark 1, below"},
		{"batch beyond the watermark", func(vs []Version) { vs[1].IDs = ids(1, 7) }, "above the watermark"},
		{"batch missing below the watermark", func(vs []Version) { vs[2].Watermarks = wm(2, 1) }, "at or below the watermark"},
		{"never appended, later gone", func(vs []Version) { vs[1].IDs = append(ids(1, 4), 99) }, "never appended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := cloneVersions(good)
			tc.plant(vs)
			if err := oldLatestOnly(vs, l.Acked.Snapshot()); err != nil {
				t.Fatalf("the old audit should pass the planted violation: %v", err)
			}
			p := l.AuditVersions(vs)
			if !strings.Contains(strings.Join(p, "\n"), tc.want) {
				t.Fatalf("the new audit: %v, want a finding with %q", p, tc.want)
			}
		})
	}
}

func cloneVersions(vs []Version) []Version {
	out := make([]Version, len(vs))
	for i, v := range vs {
		out[i] = v
		out[i].IDs = append([]int64(nil), v.IDs...)
	}
	return out
}

func TestPlantedVersionChangedAcrossCuts(t *testing.T) {
	v := func(n uint64, first, end int64) Version {
		return Version{Number: n, IDs: ids(first, end), Watermarks: map[int]uint64{0: uint64(end)}}
	}
	before := []Version{v(1, 1, 1), v(2, 1, 5), v(3, 1, 9)}
	for _, tc := range []struct {
		name    string
		after   []Version
		cleaned bool
		want    string // "" for a legitimate change
	}{
		{"a new version", []Version{v(1, 1, 1), v(2, 1, 5), v(3, 1, 9), v(4, 1, 12)}, false, ""},
		{"clean removed the oldest", []Version{v(3, 1, 9), v(4, 1, 12)}, true, ""},
		{"latest version lost in a cut, reissued", []Version{v(1, 1, 1), v(2, 1, 5), v(3, 1, 7)}, false, "changed content"},
		{"latest version lost in a cut", []Version{v(1, 1, 1), v(2, 1, 5)}, false, "version 3, seen before, is gone"},
		{"a version in the middle gone", []Version{v(1, 1, 1), v(3, 1, 9)}, true, "missing between"},
		{"oldest gone without a clean", []Version{v(2, 1, 5), v(3, 1, 9)}, false, "no `table clean` ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The old check after a cut compared the latest watermarks with
			// the WAL's trimmed point, and nothing between cuts.
			h := NewHistory()
			if p := h.Observe(before, false); len(p) != 0 {
				t.Fatal(p)
			}
			p := h.Observe(tc.after, tc.cleaned)
			got := strings.Join(p, "\n")
			if tc.want == "" && len(p) != 0 || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("Observe: %v, want %q", p, tc.want)
			}
		})
	}
}

// oldLastPosition is powerloss's old check after a cut: the WAL ends at or
// after the highest ACKed position of each shard.
func oldLastPosition(acks []Ack, last map[int]uint64) error {
	for s, p := range maxPositions(acks) {
		if last[s] < p {
			return fmt.Errorf("shard %d ends at %d, %d was ACKed", s, last[s], p)
		}
	}
	return nil
}

// fakeWAL is a shard's entries after a cut, by position.
type fakeWAL map[ShardPos][]int64

func (w fakeWAL) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	for p := from; p <= to; p++ {
		got, ok := w[ShardPos{shard, p}]
		if !ok {
			return fmt.Errorf("position %d: %w", p, wal.ErrBeyondEnd)
		}
		b := batchOf(got)
		err := fn(wal.Entry{Position: p, Record: b})
		b.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func TestPlantedReissuedPosition(t *testing.T) {
	acks := []Ack{{0, 1, Range{1, 4}}, {0, 2, Range{4, 7}}, {0, 3, Range{7, 9}}}
	after := fakeWAL{{0, 1}: ids(1, 4), {0, 2}: ids(100, 103), {0, 3}: ids(7, 9)} // position 2 reissued
	if err := oldLastPosition(acks, map[int]uint64{0: 3}); err != nil {
		t.Fatalf("the old check should pass the planted violation: %v", err)
	}
	p := ReadBack(context.Background(), after, "t", acks, nil)
	if len(p) != 1 || !strings.Contains(p[0], "position 2 was ACKed with ids [4, 7) and now holds 3 other rows") {
		t.Fatalf("ReadBack: %v", p)
	}
	after[ShardPos{0, 2}] = ids(4, 7)
	if p := ReadBack(context.Background(), after, "t", acks, nil); len(p) != 0 {
		t.Fatalf("the same WAL without the violation: %v", p)
	}
	// Positions at or below the trimmed point are not read.
	delete(after, ShardPos{0, 1})
	if p := ReadBack(context.Background(), after, "t", acks, map[int]uint64{0: 1}); len(p) != 0 {
		t.Fatalf("trimmed through 1: %v", p)
	}
	if p := ComparePositions(acks, nil, map[ShardPos][]int64{{0, 1}: ids(1, 4), {0, 3}: ids(7, 9)}); len(p) != 1 || !strings.Contains(p[0], "is gone") {
		t.Fatalf("a lost position: %v", p)
	}
	// A read that fails (a lost or damaged position) names where it stopped.
	delete(after, ShardPos{0, 3})
	if p := ReadBack(context.Background(), after, "t", acks, map[int]uint64{0: 1}); len(p) != 1 || !strings.Contains(p[0], "ACKed positions 3…3 cannot be read back") {
		t.Fatalf("position 3 unreadable: %v", p)
	}
}

func TestPlantedFaultThatNeverFired(t *testing.T) {
	f := NewFaults()
	f.Plan("worker at after-trim")
	f.Plan("kill wal under load")
	f.Fire("kill wal under load")
	// The old harnesses tallied a fault that was not reached and passed.
	oldVerdict := func(*Faults) error { return nil }
	if oldVerdict(f) != nil {
		t.Fatal("unreachable")
	}
	err := f.Err()
	if err == nil || !strings.Contains(err.Error(), "worker at after-trim (0 of 1 fired)") {
		t.Fatalf("Err: %v", err)
	}
	f.Fire("worker at after-trim")
	if err := f.Err(); err != nil {
		t.Fatalf("every planned fault fired: %v", err)
	}
	if s := f.String(); !strings.Contains(s, "1 planned     1 fired  kill wal under load") {
		t.Fatalf("String:\n%s", s)
	}
}

// AuditCommits: a version that records another plan or epoch than its
// committer logged (two winners of one number) is a finding; a version
// removed since, or one that matches, is not.
func TestAuditCommitsFindsAVersionWithTwoCommitters(t *testing.T) {
	log := `time=x level=INFO msg="table fenced" table=t1 epoch=3 parent=4
time=x level=INFO msg=published table=t1 plan=p-6 version=6 rows=10 files=1
time=x level=INFO msg=published table=t1 plan=p-7 version=7 rows=10 files=1
time=x level=INFO msg=published table=t1 plan=p-9 version=9 rows=10 files=1`
	commits := ParseCommits(log, "worker-0")
	if len(commits) != 4 {
		t.Fatalf("parsed %d commits: %+v", len(commits), commits)
	}
	vs := []Version{{Number: 5, Epoch: 3}, {Number: 6, Epoch: 3, Plan: "p-6"}, {Number: 7, Epoch: 4, Plan: "stale-plan"}}
	got := AuditCommits(vs, commits)
	if len(got) != 1 || !strings.Contains(got[0], "version 7 records plan \"stale-plan\"") {
		t.Fatalf("findings %q; want exactly version 7's", got)
	}
	vs[0].Epoch = 2
	if got := AuditCommits(vs, commits); len(got) != 2 {
		t.Fatalf("a fence at another epoch: findings %q; want 2", got)
	}
}
