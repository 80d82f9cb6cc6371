package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/errs"
)

func genFiles(t *testing.T, dir, table string, shard int, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "tables", table, shardDirName(shard), "gen-*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestTornTailTruncated(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, data, idx string)
	}{
		{"data cut inside last entry", func(t *testing.T, data, idx string) {
			if err := os.Truncate(data, fileSize(t, data)-5); err != nil {
				t.Fatal(err)
			}
		}},
		{"partial index record", func(t *testing.T, data, idx string) {
			// The last entry's index record is torn in half, its data whole.
			if err := os.Truncate(idx, fileSize(t, idx)-recSize/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"last entry bytes garbled", func(t *testing.T, data, idx string) {
			f, err := os.OpenFile(data, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 16), fileSize(t, data)-16); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openTest(t, dir, Options{})
			mustCreate(t, e, "t", 1)
			for i := 1; i <= 5; i++ {
				mustAppend(t, e, "t", 0, int64(i), 2)
			}
			e.Close()
			data, idx := genFiles(t, dir, "t", 0, ".arrows")[0], genFiles(t, dir, "t", 0, ".idx")[0]
			idxBefore := fileSize(t, idx)
			tc.tear(t, data, idx)
			e = openTest(t, dir, Options{})
			ids := readIDs(t, e, "t", 0, 1, 0)
			if len(ids) != 4 || ids[4] != 4 {
				t.Fatalf("after tear read %v, want positions 1..4", ids)
			}
			// Position 5's records go: its entry record and the synced
			// record written with it (which a failed fsync may have left
			// unwritten: the next append's records take its place).
			if got, want := fileSize(t, idx), idxBefore-2*recSize; got != want {
				t.Fatalf("index is %d bytes after recovery, want %d", got, want)
			}
			// The torn position is reused: it was never acknowledged.
			if pos := mustAppend(t, e, "t", 0, 50, 1); pos != 5 {
				t.Fatalf("append after recovery got position %d, want 5", pos)
			}
			if ids := readIDs(t, e, "t", 0, 5, 5); ids[5] != 50 {
				t.Fatalf("position 5 reads %v", ids)
			}
		})
	}
}

func sealedFixture(t *testing.T) (dir, data string) {
	dir = t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	for i := 1; i <= 4; i++ {
		mustAppend(t, e, "t", 0, int64(i*10), 3)
	}
	if _, err := e.Seal(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, "t", 0, 50, 3) // an open generation after the sealed one
	e.Close()
	return dir, filepath.Join(dir, "tables", "t", shardDirName(0), genName(1)+".arrows")
}

func TestFlippedByteInSealedGeneration(t *testing.T) {
	dir, data := sealedFixture(t)
	// Flip a byte inside the third entry's body.
	e := openTest(t, dir, Options{})
	var off int64
	e.tables["t"].shards[0].mu.Lock()
	m := e.tables["t"].shards[0].gens[0].ents[2]
	e.tables["t"].shards[0].mu.Unlock()
	off = m.off + m.n - 10
	e.Close()
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// Open contains the damage: it succeeds, lists the damage, and the
	// shard refuses reads reaching it, naming file, byte and position.
	e = openTest(t, dir, Options{})
	d := mustDamage(t, e, "t", 0, data, 3)
	if d.First != 1 || d.Last != 4 || d.Offset != m.off {
		t.Fatalf("damage %+v, want positions 1..4 and byte %d", d, m.off)
	}
	err = e.Read(context.Background(), "t", 0, 1, 0, func(Entry) error { return nil })
	if !errors.Is(err, ErrCorruptEntry) || !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "position 3") {
		t.Fatalf("read: got %v, want ErrCorruptEntry naming %s and position 3", err, data)
	}
	// The shard's end is known (the open generation after it is intact):
	// appends continue, at new positions.
	if pos := mustAppend(t, e, "t", 0, 60, 1); pos != 6 {
		t.Fatalf("append after damage got position %d, want 6", pos)
	}
	e.Close()

	// QuickOpen defers the check to the read, which reports the same way
	// after delivering the intact entries before it.
	e = openTest(t, dir, Options{QuickOpen: true})
	var seen []uint64
	err = e.Read(context.Background(), "t", 0, 1, 0, func(en Entry) error {
		seen = append(seen, en.Position)
		return nil
	})
	if !errors.Is(err, ErrCorruptEntry) || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "position 3") {
		t.Fatalf("read: got %v, want ErrCorruptEntry naming %s position 3", err, data)
	}
	if fmt.Sprint(seen) != "[1 2]" {
		t.Fatalf("read delivered %v before the corrupt entry, want [1 2]", seen)
	}
	// Nothing was repaired.
	b2, _ := os.ReadFile(data)
	if string(b2) != string(b) {
		t.Fatal("corrupt sealed generation was modified")
	}
}

func TestSealedGenerationIsPlainIPCStream(t *testing.T) {
	_, data := sealedFixture(t)
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Schema().Equal(testSchema) {
		t.Fatalf("schema %s, want %s", r.Schema(), testSchema)
	}
	var ids []int64
	for r.Next() {
		rec := r.RecordBatch()
		if rec.NumRows() != 3 {
			t.Fatalf("record has %d rows, want 3", rec.NumRows())
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Value(0))
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	if fmt.Sprint(ids) != "[10 20 30 40]" {
		t.Fatalf("read ids %v, want [10 20 30 40]", ids)
	}
}

// TestInterruptedRotation recreates the states a crash leaves in the middle
// of a rotation: the next generation's files exist (empty) and the previous
// one has no seal record. Recovery removes the empty generation; if the
// previous one's end-of-stream marker is complete the seal is finished,
// otherwise it becomes the open generation again.
func TestInterruptedRotation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tail   []byte
		sealed bool
	}{{"marker complete", eos, true}, {"marker torn", eos[:5], false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openTest(t, dir, Options{})
			mustCreate(t, e, "t", 1)
			for i := 1; i <= 3; i++ {
				mustAppend(t, e, "t", 0, int64(i), 2)
			}
			sb := e.tables["t"].schemaBytes
			e.Close()
			shardDir := filepath.Join(dir, "tables", "t", shardDirName(0))
			f, err := os.OpenFile(filepath.Join(shardDir, genName(1)+".arrows"), os.O_RDWR|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tc.tail)
			f.Close()
			g, err := newGen(shardDir, 4, sb, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			g.closeFiles()

			e = openTest(t, dir, Options{})
			if _, err := os.Stat(filepath.Join(shardDir, genName(4)+".idx")); !os.IsNotExist(err) {
				t.Fatalf("empty next generation not removed: %v", err)
			}
			if pos := mustAppend(t, e, "t", 0, 4, 2); pos != 4 {
				t.Fatalf("append got position %d, want 4", pos)
			}
			gens, _ := e.Generations(context.Background(), "t", 0)
			if tc.sealed && (len(gens) != 2 || !gens[0].Sealed || gens[0].Last != 3 || gens[1].Sealed) ||
				!tc.sealed && (len(gens) != 1 || gens[0].Sealed || gens[0].Last != 4) {
				t.Fatalf("generations %+v", gens)
			}
			if ids := readIDs(t, e, "t", 0, 1, 0); len(ids) != 4 || ids[4] != 4 {
				t.Fatalf("read %v", ids)
			}
		})
	}
}

// TestSealRecordLostAfterRotation drops the seal record of a generation that
// a later generation with entries follows (its sync had not happened): the
// stream is complete, so recovery seals it again instead of refusing.
func TestSealRecordLostAfterRotation(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{MaxGenerationBytes: 1500})
	mustCreate(t, e, "t", 1)
	for i := 1; i <= 8; i++ {
		mustAppend(t, e, "t", 0, int64(i), 3)
	}
	gens, _ := e.Generations(context.Background(), "t", 0)
	e.Close()
	if len(gens) < 2 || !gens[0].Sealed {
		t.Fatalf("fixture: %+v", gens)
	}
	idx := strings.TrimSuffix(gens[0].Path, ".arrows") + ".idx"
	if err := os.Truncate(idx, fileSize(t, idx)-recSize); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, dir, Options{MaxGenerationBytes: 1500})
	again, _ := e.Generations(context.Background(), "t", 0)
	if len(again) != len(gens) || !again[0].Sealed || again[0].Last != gens[0].Last {
		t.Fatalf("after recovery %+v, before %+v", again, gens)
	}
	if ids := readIDs(t, e, "t", 0, 1, 0); len(ids) != 8 {
		t.Fatalf("read %v", ids)
	}
	// Damage, unlike a lost seal record, is still refused.
	e.Close()
	b, _ := os.ReadFile(gens[0].Path)
	b[len(b)-len(eos)-20] ^= 1
	os.WriteFile(gens[0].Path, b, 0o644)
	e = openTest(t, dir, Options{MaxGenerationBytes: 1500})
	mustDamage(t, e, "t", 0, gens[0].Path, gens[0].Last)
	if err := e.Read(context.Background(), "t", 0, 1, 0, func(Entry) error { return nil }); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("damaged sealed generation: read got %v", err)
	}
}

// TestDamagedAcknowledgedEntryInOpenGeneration flips a byte inside an
// acknowledged entry of the open generation that later entries follow: that
// is damage, not a torn tail, and Open reports it instead of cutting.
func TestDamagedAcknowledgedEntryInOpenGeneration(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	for i := 1; i <= 5; i++ {
		mustAppend(t, e, "t", 0, int64(i), 2)
	}
	sh := e.tables["t"].shards[0]
	m := sh.gens[0].ents[1]
	e.Close()
	data := genFiles(t, dir, "t", 0, ".arrows")[0]
	b, _ := os.ReadFile(data)
	b[m.off+m.n-12] ^= 0x08
	os.WriteFile(data, b, 0o644)
	e = openTest(t, dir, Options{})
	if d := mustDamage(t, e, "t", 0, data, 2); d.Last != 0 {
		t.Fatalf("damage %+v: the open generation's end is unknown", d)
	}
	// The shard's next position is unknown: appends are refused, loudly.
	rec := testRecord(t, 9, 1)
	defer rec.Release()
	if _, err := e.Append(context.Background(), "t", 0, rec); !errors.Is(err, ErrCorruptEntry) || !strings.Contains(err.Error(), data) {
		t.Fatalf("append to a shard whose end is unknown: got %v", err)
	}
	if got := fileSize(t, data); got != int64(len(b)) {
		t.Fatalf("damaged open generation was truncated to %d bytes", got)
	}
}

// TestUnfinishedRotationWithLaterEntries recreates a crash during the sync
// that covers a rotation: the closed generation lacks its seal record and
// part of its end-of-stream marker, and the next generation holds an entry.
// Under temporary names (no sync covered it, as such a crash leaves it)
// none of it was acknowledged: recovery cuts back and removes it. Under its
// own name, or with a synced record vouching for its first entry, the
// covering sync had completed: the closed generation's torn end is damage,
// reported, and nothing is removed.
func TestUnfinishedRotationWithLaterEntries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later int
		temp  bool
	}{{"later generation never synced", 1, true}, {"later generation named", 1, false}, {"synced record in the later generation", 2, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openTest(t, dir, Options{})
			mustCreate(t, e, "t", 1)
			for i := 1; i <= 3; i++ {
				mustAppend(t, e, "t", 0, int64(i), 2)
			}
			if _, err := e.Seal(context.Background(), "t", 0); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.later; i++ {
				mustAppend(t, e, "t", 0, int64(4+i), 2)
			}
			e.Close()
			shardDir := filepath.Join(dir, "tables", "t", shardDirName(0))
			base := filepath.Join(shardDir, genName(1))
			os.Truncate(base+".idx", fileSize(t, base+".idx")-recSize)
			os.Truncate(base+".arrows", fileSize(t, base+".arrows")-3)
			if tc.temp {
				for _, ext := range []string{".idx", ".arrows"} {
					if err := os.Rename(filepath.Join(shardDir, genName(4)+ext), filepath.Join(shardDir, tempName(4)+ext)); err != nil {
						t.Fatal(err)
					}
				}
			}
			e2, err := Open(dir, Options{MaxGenerationAge: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer e2.Close()
			if !tc.temp {
				mustDamage(t, e2, "t", 0, base+".arrows", 4)
				if _, err := os.Stat(filepath.Join(shardDir, genName(4)+".idx")); err != nil {
					t.Fatalf("later generation touched: %v", err)
				}
				return
			}
			gens, _ := e2.Generations(context.Background(), "t", 0)
			if len(gens) != 1 || gens[0].Sealed || gens[0].Last != 3 {
				t.Fatalf("generations %+v, want one open generation 1..3", gens)
			}
			if pos := mustAppend(t, e2, "t", 0, 40, 2); pos != 4 {
				t.Fatalf("append got %d, want 4", pos)
			}
		})
	}
}

// mustDamage checks that the engine reports exactly one damaged range in
// table/shard, naming file and position, and returns it.
func mustDamage(t *testing.T, e *Engine, table string, shard int, file string, pos uint64) DamageReport {
	t.Helper()
	ds := e.Damage()
	if len(ds) != 1 || ds[0].Table != table || ds[0].Shard != shard || ds[0].File != file || ds[0].Position != pos {
		t.Fatalf("damage %+v, want one report naming %s position %d", ds, file, pos)
	}
	st, err := e.Stats(context.Background(), table, nil)
	if err != nil || len(st.Shards[shard].Damage) != 1 {
		t.Fatalf("stats do not carry the damage: %+v, %v", st, err)
	}
	return ds[0]
}
