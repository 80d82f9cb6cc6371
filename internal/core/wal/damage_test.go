package wal

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// flip32 flips 32 bytes of a file at off (issue 13 item 3's damage).
func flip32(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := off; i < off+32 && i < int64(len(b)); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamageContainedToShard flips 32 bytes in one table's sealed
// generation: the engine opens, every other shard and table keeps working,
// the damaged shard refuses reads past the damage naming file and byte, and
// a quarantine moves the generation aside with an audit record without any
// position being issued twice.
func TestDamageContainedToShard(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "a", 2)
	mustCreate(t, e, "b", 1)
	for i := int64(1); i <= 3; i++ {
		mustAppend(t, e, "a", 0, i, 4)
		mustAppend(t, e, "a", 1, i, 4)
		mustAppend(t, e, "b", 0, i, 4)
	}
	if _, err := e.Seal(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, "a", 0, 4, 4) // the open generation after the sealed one
	e.Close()
	data := filepath.Join(dir, "tables", "a", shardDirName(0), genName(1)+".arrows")
	flip32(t, data, fileSize(t, data)/2)

	e = openTest(t, dir, Options{})
	d := mustDamage(t, e, "a", 0, data, 2)
	if d.Generation != 1 || d.First != 1 || d.Last != 3 || !strings.Contains(d.String(), data) {
		t.Fatalf("damage %+v", d)
	}
	// Listed as a damaged generation, so that planning reaches it and fails
	// loudly rather than stopping silently before it.
	if gens, _ := e.Generations(ctx, "a", 0); len(gens) != 2 || !gens[0].Damaged || gens[0].First != 1 || gens[0].Last != 3 || gens[1].Damaged {
		t.Fatalf("generations %+v", gens)
	}
	err := e.Read(ctx, "a", 0, 1, 0, func(Entry) error { return nil })
	if !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "byte ") {
		t.Fatalf("read of the damaged shard: %v", err)
	}
	if _, err := e.Trim(ctx, "a", 0, 3, 0); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("trim through the damage: %v", err)
	}
	// The rest works: other shard, other table, the damaged shard's appends.
	for _, c := range []struct {
		table string
		shard int
		want  uint64
	}{{"a", 1, 4}, {"b", 0, 4}, {"a", 0, 5}} {
		if pos := mustAppend(t, e, c.table, c.shard, 10, 1); pos != c.want {
			t.Fatalf("%s/%d: append got %d, want %d", c.table, c.shard, pos, c.want)
		}
	}
	if ids := readIDs(t, e, "b", 0, 1, 0); len(ids) != 4 {
		t.Fatalf("table b reads %v", ids)
	}
	if g, err := e.Seal(ctx, "a", 1); err != nil || g.Last != 4 {
		t.Fatalf("seal a/1: %+v %v", g, err)
	}
	if n, err := e.Trim(ctx, "a", 1, 4, 0); err != nil || n != 4 {
		t.Fatalf("trim a/1: %d %v", n, err)
	}

	// A healthy generation is refused without Force; the open one always.
	req := QuarantineRequest{Table: "a", Shard: 0, Generation: 4, Actor: "test", Reason: "r"}
	if _, err := e.Quarantine(ctx, req); !errors.Is(err, ErrNotDamaged) {
		t.Fatalf("quarantine of the open generation: %v", err)
	}
	req.Generation = 1
	res, err := e.Quarantine(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.First != 1 || res.Last != 3 || res.Damage == nil || len(res.Files) != 2 || !strings.HasPrefix(res.Dir, filepath.Join(dir, "quarantine", "a", shardDirName(0))) {
		t.Fatalf("quarantine result %+v", res)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("damaged file still in place: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, quarantineRecord))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := decodeQuarantineRecord(b); err != nil || r.Actor != "test" || r.Reason != "r" || r.At.IsZero() {
		t.Fatalf("audit record %+v, %v", r, err)
	}
	if _, err := e.Quarantine(ctx, req); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("second quarantine: %v", err)
	}
	e.Close()

	// After a reopen the range stays unreadable and is never issued again.
	e = openTest(t, dir, Options{})
	ds := e.Damage()
	if len(ds) != 1 || ds[0].Quarantined != res.Dir || ds[0].First != 1 || ds[0].Last != 3 {
		t.Fatalf("damage after quarantine %+v", ds)
	}
	err = e.Read(ctx, "a", 0, 4, 0, func(Entry) error { return nil })
	if !errors.Is(err, ErrCorruptEntry) || !strings.Contains(err.Error(), res.Dir) {
		t.Fatalf("read past the quarantined range: %v", err)
	}
	if pos := mustAppend(t, e, "a", 0, 11, 1); pos != 6 {
		t.Fatalf("append after quarantine got %d, want 6", pos)
	}
}

// TestQuarantineDamagedEnd quarantines a damaged open generation, whose
// last position is unknown: the shard refuses appends until then, and after
// it issues positions above every one the generation could have held.
func TestQuarantineDamagedEnd(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	for i := int64(1); i <= 5; i++ {
		mustAppend(t, e, "t", 0, i, 2)
	}
	m := e.tables["t"].shards[0].gens[0].ents[1]
	e.Close()
	data := filepath.Join(dir, "tables", "t", shardDirName(0), genName(1)+".arrows")
	flip32(t, data, m.off+m.n-40)

	e = openTest(t, dir, Options{})
	mustDamage(t, e, "t", 0, data, 2)
	res, err := e.Quarantine(ctx, QuarantineRequest{Table: "t", Shard: 0, Generation: 1, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.LastIsBound || res.Last < 5 {
		t.Fatalf("quarantine %+v: want an upper bound covering the 5 ACKed positions", res)
	}
	pos := mustAppend(t, e, "t", 0, 9, 1)
	if pos <= 5 || pos != res.Last+1 {
		t.Fatalf("append after quarantine got %d, want %d", pos, res.Last+1)
	}
	e.Close()
	e = openTest(t, dir, Options{})
	if p := mustAppend(t, e, "t", 0, 10, 1); p != pos+1 {
		t.Fatalf("append after reopen got %d, want %d", p, pos+1)
	}
}

// TestUnfinishedQuarantineUndone: files moved without an audit record (a
// crash in the middle of Quarantine) go back at the next open.
func TestUnfinishedQuarantineUndone(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 1, 2)
	e.Close()
	q := filepath.Join(dir, quarantineDirName, "t", shardDirName(0), genName(1)+"-x")
	if err := os.MkdirAll(q, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".arrows", ".idx"} {
		if err := os.Rename(filepath.Join(dir, "tables", "t", shardDirName(0), genName(1)+ext), filepath.Join(q, genName(1)+ext)); err != nil {
			t.Fatal(err)
		}
	}
	e = openTest(t, dir, Options{})
	if ids := readIDs(t, e, "t", 0, 1, 0); len(ids) != 1 || len(e.Damage()) != 0 {
		t.Fatalf("read %v, damage %v", ids, e.Damage())
	}
	if _, err := os.Stat(q); !os.IsNotExist(err) {
		t.Fatalf("unfinished quarantine directory left: %v", err)
	}
}

// TestDamagedRegistrationContained: a table whose table.json is garbage is
// reported and refuses calls with exit 6; other tables work.
func TestDamagedRegistrationContained(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "a", 1)
	mustCreate(t, e, "b", 1)
	e.Close()
	p := filepath.Join(dir, "tables", "a", tableFileName)
	flip32(t, p, 0)
	e = openTest(t, dir, Options{})
	if ds := e.Damage(); len(ds) != 1 || ds[0].Table != "a" || ds[0].Shard != -1 || ds[0].File != p {
		t.Fatalf("damage %+v", ds)
	}
	if _, err := e.Table(context.Background(), "a"); !errors.Is(err, ErrCorruptEntry) || !strings.Contains(err.Error(), p) {
		t.Fatalf("table a: %v", err)
	}
	if _, err := e.CreateTable(context.Background(), "a", testSchema, 1); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("re-registering a damaged table: %v", err)
	}
	if pos := mustAppend(t, e, "b", 0, 1, 1); pos != 1 {
		t.Fatalf("table b append got %d", pos)
	}
}

// TestFailedSyncIsFatalForShard: an fsync error stops the shard (appends
// fail with ErrSyncFailed) and is never retried into a success.
func TestFailedSyncIsFatalForShard(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 2)
	mustAppend(t, e, "t", 0, 1, 1)
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(durable.FailSync+"=error*1", ""); err != nil {
		t.Fatal(err)
	}
	rec := testRecord(t, 2, 1)
	defer rec.Release()
	for i := 0; i < 2; i++ {
		_, err := e.Append(context.Background(), "t", 0, rec)
		if !errors.Is(err, durable.ErrSyncFailed) || !errors.Is(err, ErrIO) {
			t.Fatalf("append %d after a failed fsync: %v, want ErrSyncFailed", i, err)
		}
	}
	if pos := mustAppend(t, e, "t", 1, 3, 1); pos != 1 {
		t.Fatalf("other shard append got %d", pos)
	}
}

// TestCutEntriesLoggedAtErrorLevel: recovery cutting recorded entries off the
// open generation says so at error level, with file and positions.
func TestCutEntriesLoggedAtErrorLevel(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	for i := int64(1); i <= 3; i++ {
		mustAppend(t, e, "t", 0, i, 2)
	}
	e.Close()
	data := filepath.Join(dir, "tables", "t", shardDirName(0), genName(1)+".arrows")
	flip32(t, data, fileSize(t, data)-32)
	var buf bytes.Buffer
	e = openTest(t, dir, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	out := buf.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, data) || !strings.Contains(out, "first_cut_position=3") || !strings.Contains(out, "cut_entries=1") {
		t.Fatalf("log %q does not report the cut at error level", out)
	}
	if pos := mustAppend(t, e, "t", 0, 4, 1); pos != 3 {
		t.Fatalf("append got %d, want 3", pos)
	}
}

// TestFailedEpochSyncIsSticky: an epoch whose fsync failed is unknown on
// disk; the table refuses further CAS and trims instead of trusting it.
func TestFailedEpochSyncIsSticky(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(durable.FailSync+"=error*1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AdvanceEpoch(ctx, "t", 0); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("advance with a failed fsync: %v", err)
	}
	ep, _ := e.Epoch(ctx, "t")
	if _, err := e.AdvanceEpoch(ctx, "t", ep); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("advance after a failed fsync: %v, want the sticky ErrSyncFailed", err)
	}
	if _, err := e.Trim(ctx, "t", 0, 0, ep); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("trim after a failed epoch fsync: %v", err)
	}
}

// TestTableDirectorySyncFailsAtOpen: the sync that makes a table's
// registration and epoch durable fails at open. The table is then
// unavailable (an I/O failure, exit 5: retried, not reported as damage)
// for that engine's life; other tables work; the next open serves it.
func TestTableDirectorySyncFailsAtOpen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "a", 1)
	mustCreate(t, e, "b", 1)
	mustAppend(t, e, "a", 0, 1, 1)
	e.Close()
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(durable.FailSync+"=error@1*1", ""); err != nil { // the first directory sync: table a's
		t.Fatal(err)
	}
	e = openTest(t, dir, Options{})
	failpoint.Reset()
	if _, err := e.Epoch(ctx, "a"); !errors.Is(err, ErrIO) || errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("epoch of a table whose directory sync failed at open: %v; want an I/O failure", err)
	}
	if d := e.Damage(); len(d) != 0 {
		t.Fatalf("a failed sync reported as damage: %v", d)
	}
	if pos := mustAppend(t, e, "b", 0, 1, 1); pos != 1 {
		t.Fatalf("other table: %d", pos)
	}
	e.Close()
	e = openTest(t, dir, Options{})
	if ids := readIDs(t, e, "a", 0, 1, 0); len(ids) != 1 {
		t.Fatalf("after the next open: %v", ids)
	}
}
