package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestDamagedLastGenerationIsReportedNotDeleted damages, in every way that
// once made recovery take it for an unfinished creation and delete it, the
// only generation of a shard holding an acknowledged batch (positions 1..5,
// appended in one sync, so no synced record vouches for them): a missing,
// cut, zeroed or garbled index, a garbled schema prefix, a missing or cut
// data file, and files that cannot be read. Each time the damage must be
// reported naming the file, nothing deleted, and the shard must refuse
// appends instead of issuing position 1 again (DESIGN.md §3 rules 18, 22).
func TestDamagedLastGenerationIsReportedNotDeleted(t *testing.T) {
	unreadableFile := func(t *testing.T, p string) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(p, 0o755); err != nil { // reads fail with EISDIR, not ENOENT
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, idx, data string)
		file   string // "idx" or "data": the file the report names
	}{
		{"index missing", func(t *testing.T, idx, _ string) { os.Remove(idx) }, "idx"},
		{"index cut to nothing", func(t *testing.T, idx, _ string) { os.Truncate(idx, 0) }, "idx"},
		{"index cut inside its header", func(t *testing.T, idx, _ string) { os.Truncate(idx, 20) }, "idx"},
		{"index cut to its header", func(t *testing.T, idx, _ string) { os.Truncate(idx, recSize) }, "data"},
		{"index cut inside its first record", func(t *testing.T, idx, _ string) { os.Truncate(idx, recSize+10) }, "data"},
		{"index header zeroed", func(t *testing.T, idx, _ string) { writeAt(t, idx, make([]byte, recSize), 0) }, "idx"},
		{"index header garbled", func(t *testing.T, idx, _ string) { flip32(t, idx, 8) }, "idx"},
		{"schema prefix garbled", func(t *testing.T, _, data string) { flip32(t, data, 40) }, "idx"},
		{"data missing", func(t *testing.T, _, data string) { os.Remove(data) }, "idx"},
		{"data cut to nothing", func(t *testing.T, _, data string) { os.Truncate(data, 0) }, "idx"},
		{"data cut to its schema prefix", func(t *testing.T, _, data string) { os.Truncate(data, prefixLen(t)) }, "data"},
		{"index unreadable", func(t *testing.T, idx, _ string) { unreadableFile(t, idx) }, "idx"},
		{"data unreadable", func(t *testing.T, _, data string) { unreadableFile(t, data) }, "data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openTest(t, dir, Options{})
			mustCreate(t, e, "t", 2)
			var recs []arrow.RecordBatch
			for i := int64(0); i < 5; i++ {
				recs = append(recs, makeRecord(100*(i+1), 3))
			}
			if pos, err := e.AppendBatch(context.Background(), "t", 0, recs); err != nil || pos[4] != 5 {
				t.Fatalf("fixture: %v %v", pos, err)
			}
			for _, r := range recs {
				r.Release()
			}
			e.Close()
			base := filepath.Join(dir, "tables", "t", shardDirName(0), genName(1))
			idx, data := base+".idx", base+".arrows"
			tc.damage(t, idx, data)
			_, dataErr := os.Stat(data)

			e = openTest(t, dir, Options{})
			want := idx
			if tc.file == "data" {
				want = data
			}
			ds := e.Damage()
			if len(ds) != 1 || ds[0].Shard != 0 || ds[0].File != want || ds[0].First != 1 {
				t.Fatalf("damage %+v, want one report of shard 0 naming %s from position 1", ds, want)
			}
			if _, err := os.Stat(data); (err == nil) != (dataErr == nil) {
				t.Fatalf("recovery changed the data file: before %v, after %v", dataErr, err)
			}
			rec := makeRecord(900, 1)
			defer rec.Release()
			if pos, err := e.Append(context.Background(), "t", 0, rec); !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("append to the damaged shard: position %d, %v; want it refused", pos, err)
			}
			if pos := mustAppend(t, e, "t", 1, 1, 1); pos != 1 {
				t.Fatalf("the other shard's append got %d", pos)
			}
		})
	}
}

// TestGenerationUnderTemporaryNames: a generation whose first entry was
// never covered by a sync stays under temporary names and is removed at
// recovery without a report (none of it was acknowledged); one whose rename
// a crash interrupted (its index renamed, its data not) had its first entry
// durable and is completed and served.
func TestGenerationUnderTemporaryNames(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{MaxGenerationBytes: 1})
	mustCreate(t, e, "t", 1)
	for i := int64(1); i <= 3; i++ {
		mustAppend(t, e, "t", 0, 100*i, 2)
	}
	e.Close()
	shardDir := filepath.Join(dir, "tables", "t", shardDirName(0))
	// The last generation's data back under its temporary name: an
	// interrupted rename.
	if err := os.Rename(filepath.Join(shardDir, genName(3)+".arrows"), filepath.Join(shardDir, tempName(3)+".arrows")); err != nil {
		t.Fatal(err)
	}
	// A generation after it that no sync covered.
	sb := mustSchemaBytes(t)
	g, err := newGen(shardDir, 4, sb, e.opts.Clock.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.data.WriteAt(make([]byte, 100), int64(len(sb))) // bytes no index record describes
	g.closeFiles()

	e = openTest(t, dir, Options{MaxGenerationBytes: 1})
	if d := e.Damage(); len(d) != 0 {
		t.Fatalf("damage %v", d)
	}
	if ids := readIDs(t, e, "t", 0, 1, 0); len(ids) != 3 || ids[3] != 300 {
		t.Fatalf("served %v, want positions 1..3", ids)
	}
	left, _ := filepath.Glob(filepath.Join(shardDir, tempPrefix+"*"))
	if len(left) != 0 {
		t.Fatalf("temporary names left: %v", left)
	}
	if pos := mustAppend(t, e, "t", 0, 400, 2); pos != 4 {
		t.Fatalf("append got %d, want 4", pos)
	}
}

func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func prefixLen(t *testing.T) int64 { return int64(len(mustSchemaBytes(t))) }

// TestLaterNamedGenerationProvesEarlierStream: generation A (positions
// 1..3, appended in one batch: no synced record) and B (position 4) were
// renamed after one sync covered them both, so A's whole stream was
// durable when B got its name; A's seal record was still pending and is
// lost. Damage to A's last entry must then be reported — not cut as a torn
// tail together with B, whose acknowledged position would be issued again.
func TestLaterNamedGenerationProvesEarlierStream(t *testing.T) {
	dir := t.TempDir()
	size := entryBytes(t)
	opts := Options{MaxGenerationBytes: prefixLen(t) + 3*size}
	e := openTest(t, dir, opts)
	mustCreate(t, e, "t", 1)
	var recs []arrow.RecordBatch
	for i := int64(1); i <= 4; i++ {
		recs = append(recs, makeRecord(100*i, 3))
	}
	if pos, err := e.AppendBatch(context.Background(), "t", 0, recs); err != nil || pos[3] != 4 {
		t.Fatalf("fixture: %v %v", pos, err)
	}
	for _, r := range recs {
		r.Release()
	}
	e.Close()
	shardDir := filepath.Join(dir, "tables", "t", shardDirName(0))
	a := filepath.Join(shardDir, genName(1))
	if err := os.Truncate(a+".idx", fileSize(t, a+".idx")-recSize); err != nil { // the pending seal record
		t.Fatal(err)
	}
	flip32(t, a+".arrows", prefixLen(t)+2*size+size/2) // position 3
	e = openTest(t, dir, opts)
	mustDamage(t, e, "t", 0, a+".arrows", 3)
	if _, err := os.Stat(filepath.Join(shardDir, genName(4)+".arrows")); err != nil {
		t.Fatalf("the later generation (acknowledged position 4) was removed: %v", err)
	}
}

// TestForeignWAL3HeaderIsDamage: a named generation's index header reads
// as another WAL3 generation's (a lost write). A WAL3 file gets its
// generation's name only with its own header durable, so this is damage to
// report, not a trimmed generation's files never taken over.
func TestForeignWAL3HeaderIsDamage(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 100, 3)
	e.Close()
	idx := filepath.Join(dir, "tables", "t", shardDirName(0), genName(1)+".idx")
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := unmarshalRec(b)
	writeAt(t, idx, idxRec{kind: kindHeader3, crc: own.crc, a: 77, b: own.b, salt: own.salt}.marshal(), 0)
	e = openTest(t, dir, Options{})
	mustDamage(t, e, "t", 0, idx, 1)
	if _, err := os.Stat(idx); err != nil {
		t.Fatalf("the damaged generation was removed: %v", err)
	}
}

// entryBytes is the encoded size of makeRecord(_, 3).
func entryBytes(t *testing.T) int64 {
	t.Helper()
	e := openTest(t, t.TempDir(), Options{})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 1, 3)
	gens, _ := e.Generations(context.Background(), "t", 0)
	e.Close()
	return gens[0].Bytes
}

// TestSyncFailedRecordOfAnotherBoot: the record of a sync that failed
// during recovery names its boot, so a power cut that keeps its name and
// loses its content (an empty file) still lets a later boot remove it and
// recover the shard; in the same boot, an empty record still refuses it.
func TestSyncFailedRecordOfAnotherBoot(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 100, 2)
	e.Close()
	record := filepath.Join(dir, "tables", "t", shardDirName(0), syncFailedName())
	if err := os.WriteFile(record, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, dir, Options{})
	mustDamage(t, e, "t", 0, record, 1)
	e.Close()
	defer func(old func() string) { bootID = old }(bootID)
	bootID = func() string { return "a-later-boot" }
	e = openTest(t, dir, Options{})
	if d := e.Damage(); len(d) != 0 {
		t.Fatalf("after a reboot: %v", d)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Fatalf("the record of an earlier boot is still there: %v", err)
	}
}
