package walraft

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/wal"
)

func openTestFSM(t *testing.T, dir string) *fsm {
	t.Helper()
	f, err := openFSM(dir, wal.Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func appendLog(t *testing.T, index uint64, id int64) *raft.Log {
	t.Helper()
	rec := record(id, 10)
	defer rec.Release()
	b, err := encodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	c := command{Op: opAppend, Table: "t1", Payload: b}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: c.encode()}
}

func createLog(t *testing.T, index uint64) *raft.Log {
	t.Helper()
	sb, err := encodeSchema(testSchema)
	if err != nil {
		t.Fatal(err)
	}
	c := command{Op: opCreate, Table: "t1", Shards: 1, Payload: sb}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: c.encode()}
}

func lastPos(t *testing.T, f *fsm) uint64 {
	t.Helper()
	st, err := f.eng.Stats(context.Background(), "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return st.Shards[0].LastPosition
}

// TestFSMReplayAfterCrash: raft replays entries after a restart. Commands
// the progress record covers are skipped; the one in doubt (its intent was
// written, then the process died) is applied again only if the engine does
// not hold it — both cases.
func TestFSMReplayAfterCrash(t *testing.T) {
	dir := t.TempDir()
	f := openTestFSM(t, dir)
	for i, l := range []*raft.Log{createLog(t, 1), appendLog(t, 2, 10), appendLog(t, 3, 11)} {
		if r := f.Apply(l).(result); r.err != nil {
			t.Fatalf("apply %d: %v", i, r.err)
		}
	}
	f.close()

	// Died after applying index 3 (its intent is the last record): the
	// replay of 1..3 must add nothing.
	f = openTestFSM(t, dir)
	for _, l := range []*raft.Log{createLog(t, 1), appendLog(t, 2, 10), appendLog(t, 3, 11)} {
		f.Apply(l)
	}
	if got := lastPos(t, f); got != 2 {
		t.Fatalf("after replaying applied commands the shard ends at %d, want 2", got)
	}
	// Died after writing the intent of index 4 but before the engine
	// applied it: the replay must apply it.
	fp := f.fingerprint(context.Background(), command{Op: opAppend, Table: "t1"})
	if err := f.applied.write(appliedRec{Index: 4, Pending: true, FP: fp}); err != nil {
		t.Fatal(err)
	}
	f.close()
	f = openTestFSM(t, dir)
	if r := f.Apply(appendLog(t, 4, 12)).(result); r.err != nil || r.pos != 3 {
		t.Fatalf("in-doubt command not applied: %+v", r)
	}
	f.close()
	// And once it has landed, a second replay leaves it alone.
	f = openTestFSM(t, dir)
	f.Apply(appendLog(t, 4, 12))
	f.Apply(appendLog(t, 5, 13))
	if got := lastPos(t, f); got != 4 {
		t.Fatalf("shard ends at %d, want 4", got)
	}
	f.close()
}

// TestAppliedRecordSurvivesTornSlot: a torn write destroys only the slot
// being written; the previous record is used.
func TestAppliedRecordSurvivesTornSlot(t *testing.T) {
	dir := t.TempDir()
	s, err := openApplied(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.write(appliedRec{Index: 7})
	s.write(appliedRec{Index: 8, Pending: true, FP: "x"})
	// Tear the slot holding index 8.
	if _, err := s.f.WriteAt([]byte("garbage"), int64(s.rec.Seq%2)*slotSize+10); err != nil {
		t.Fatal(err)
	}
	s.close()
	s, err = openApplied(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.rec.Index != 7 || s.rec.Pending {
		t.Fatalf("after a torn slot: %+v, want index 7 settled", s.rec)
	}
}

// TestRunResolvedAfterCrash: a run of appends applied with one sync per
// shard is interrupted after part of it landed; at the next open the run is
// finished from the raft log: landed appends are skipped, the rest applied,
// in order, each exactly once.
func TestRunResolvedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	f := openTestFSM(t, dir)
	f.Apply(createLog(t, 1))
	run := []*raft.Log{appendLog(t, 2, 10), appendLog(t, 3, 11), appendLog(t, 4, 12), appendLog(t, 5, 13)}
	for _, r := range f.ApplyBatch(run[:2]) {
		if r.(result).err != nil {
			t.Fatal(r.(result).err)
		}
	}
	// The crash: the record says the whole run 2..5 was in flight from
	// position 0; the engine holds only its first two appends.
	if err := f.applied.write(appliedRec{Index: 2, Last: 5, Pending: true, Run: []runShard{{Table: "t1", Shard: 0, Before: 0}}}); err != nil {
		t.Fatal(err)
	}
	f.close()
	store := raft.NewInmemStore()
	if err := store.StoreLogs(append([]*raft.Log{createLog(t, 1)}, run...)); err != nil {
		t.Fatal(err)
	}
	f = openTestFSM(t, dir)
	defer f.close()
	if err := f.resolveRun(store); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	f.eng.Read(context.Background(), "t1", 0, 1, 0, func(e wal.Entry) error {
		ids = append(ids, recordID(e.Record))
		return nil
	})
	if want := []int64{10, 11, 12, 13}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("after finishing the run the shard holds %v, want %v", ids, want)
	}
	if f.index.Load() != 5 || f.applied.rec.Pending {
		t.Fatalf("progress after the run: index %d, record %+v", f.index.Load(), f.applied.rec)
	}
	// Raft then replays 2..5: nothing more lands.
	f.ApplyBatch(run)
	if got := lastPos(t, f); got != 4 {
		t.Fatalf("replay after resolution: last position %d, want 4", got)
	}
}

// entryLog is an append in the current format: the entry bytes as the
// engine of f encodes them (f must know table t1).
func entryLog(t *testing.T, f *fsm, index uint64, id int64) *raft.Log {
	t.Helper()
	rec := record(id, 10)
	defer rec.Release()
	enc, err := f.eng.Encode(context.Background(), "t1", 0, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Release()
	c := command{Op: opAppendEntry, Table: "t1", Payload: enc.Raw}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: c.encode()}
}

// TestAppendFormatsApplyAlike: appends logged as record streams (earlier
// versions) and as entry bytes apply alike, one at a time or mixed in a
// run; a damaged entry in a run is refused alone, as a single append
// would be, and the others land.
func TestAppendFormatsApplyAlike(t *testing.T) {
	single, run := openTestFSM(t, t.TempDir()), openTestFSM(t, t.TempDir())
	defer single.close()
	defer run.close()
	for _, f := range []*fsm{single, run} {
		if r := f.Apply(createLog(t, 1)).(result); r.err != nil {
			t.Fatal(r.err)
		}
	}
	for i, l := range []*raft.Log{appendLog(t, 2, 10), entryLog(t, single, 3, 11), appendLog(t, 4, 12)} {
		if r := single.Apply(l).(result); r.err != nil || r.pos != uint64(i+1) {
			t.Fatalf("single apply %d: %+v", i, r)
		}
	}
	damaged := entryLog(t, run, 4, 99)
	damaged.Data = damaged.Data[:len(damaged.Data)-16]
	logs := []*raft.Log{entryLog(t, run, 2, 10), appendLog(t, 3, 11), damaged, entryLog(t, run, 5, 12)}
	out := run.ApplyBatch(logs)
	want := []uint64{1, 2, 0, 3}
	for i, o := range out {
		r := o.(result)
		if r.pos != want[i] || (i == 2) != (r.err != nil) {
			t.Fatalf("run outcome %d: %+v, want position %d", i, r, want[i])
		}
	}
	if err := out[2].(result).err; !errors.Is(err, wal.ErrSchemaMismatch) {
		t.Fatalf("damaged entry: %v, want a schema mismatch", err)
	}
	a, b := readAll(t, single.eng), readAll(t, run.eng)
	if len(a) != 3 || !reflect.DeepEqual(a, b) {
		t.Fatalf("engines differ: %v vs %v", a, b)
	}
}

// readAll is entries 1..3 of t1 shard 0 as their rows' ids.
func readAll(t *testing.T, e *wal.Engine) [][]int64 {
	t.Helper()
	var out [][]int64
	err := e.Read(context.Background(), "t1", 0, 1, 3, func(en wal.Entry) error {
		ids := en.Record.Column(0).(*array.Int64)
		out = append(out, append([]int64(nil), ids.Int64Values()...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
