package wal

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// fill appends n entries of 20 rows (ids base, base+100, ...) and returns
// their positions.
func fill(t *testing.T, e *Engine, base int64, n int) []uint64 {
	t.Helper()
	var out []uint64
	for i := 0; i < n; i++ {
		out = append(out, mustAppend(t, e, "t", 0, base+int64(i)*100, 20))
	}
	return out
}

// trimAll trims every sealed generation and waits until their files are
// kept or deleted.
func trimAll(t *testing.T, e *Engine) {
	t.Helper()
	gens, err := e.Generations(context.Background(), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var through uint64
	for _, g := range gens {
		if g.Sealed {
			through = g.Last
		}
	}
	if _, err := e.Trim(context.Background(), "t", 0, through, 0); err != nil {
		t.Fatal(err)
	}
	e.removers.Wait()
}

func recycledFiles(t *testing.T, shardDir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(shardDir, recycledPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A trimmed generation's files are kept and the next generation is written
// over them; after a restart the new generation holds exactly its own
// entries — the old generation's records and data that follow them, the
// same sizes at the same offsets, are never taken for entries — and a
// sealed generation is again exactly an Arrow IPC stream.
func TestTrimmedGenerationFilesAreRecycled(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxGenerationBytes: 6 << 10}
	e := openTest(t, dir, opts)
	mustCreate(t, e, "t", 1)
	shardDir := filepath.Join(dir, "tables", "t", shardDirName(0))
	first := fill(t, e, 0, 40)
	gens, _ := e.Generations(context.Background(), "t", 0)
	if len(gens) < 4 {
		t.Fatalf("%d generations; the test needs several", len(gens))
	}
	if _, err := e.Seal(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	trimAll(t, e)
	if n := len(recycledFiles(t, shardDir)); n != 2*DefaultRecycledGenerations {
		t.Fatalf("%d kept files after the trim, want %d", n, 2*DefaultRecycledGenerations)
	}
	trimmed := first[len(first)-1]
	// Two new generations take the kept pairs: the first is sealed after
	// two entries (its recycled files are cut to them), the second is left
	// open with two, fewer than the generation it overwrites had.
	after := fill(t, e, 10_000, 2)
	if _, err := e.Seal(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	after = append(after, fill(t, e, 10_200, 2)...)
	if m := recycledFiles(t, shardDir); len(m) != 0 {
		t.Fatalf("kept files left unused: %v", m)
	}
	gs, _ := e.Generations(context.Background(), "t", 0)
	open := gs[len(gs)-1]
	st, err := os.Stat(open.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() <= open.Bytes {
		t.Fatalf("open generation file has %d bytes, its entries %d: not written over a longer one", st.Size(), open.Bytes)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openTest(t, dir, opts)
	ids := readIDs(t, e, "t", 0, trimmed+1, 0)
	if want := len(after); len(ids) != want {
		t.Fatalf("after reopening: %d entries, want %d (the recycled files' leftovers were read as entries?)", len(ids), want)
	}
	for i, p := range after {
		if ids[p] != 10_000+int64(i)*100 {
			t.Fatalf("position %d: id %d, want %d", p, ids[p], 10_000+int64(i)*100)
		}
	}
	// Sealed generations written over recycled files are plain streams.
	if _, err := e.Seal(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	gs, _ = e.Generations(context.Background(), "t", 0)
	for _, g := range gs {
		f, err := os.Open(g.Path)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		r, err := ipc.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r.Next() {
			n++
		}
		if r.Err() != nil || n != g.Entries || fi.Size() != int64(len(mustSchemaBytes(t))+len(eos))+g.Bytes {
			t.Fatalf("%s: %d of %d entries read (%v), %d bytes on disk for %d", g.Path, n, g.Entries, r.Err(), fi.Size(), g.Bytes)
		}
		r.Release()
		f.Close()
	}
}

// A read that opened a generation before its trim keeps it: its files are
// not written over until the read ends.
func TestRecycledFilesWaitForReadsInProgress(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{MaxGenerationBytes: 6 << 10, RecycledGenerations: 1})
	mustCreate(t, e, "t", 1)
	ps := fill(t, e, 0, 30)
	gens, _ := e.Generations(context.Background(), "t", 0)
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before Close waits for the read
	go func() {
		n := 0
		done <- e.Read(context.Background(), "t", 0, 1, gens[0].Last, func(en Entry) error {
			if n == 0 {
				close(started)
				<-release
			}
			if got := en.Record.Column(0).(interface{ Value(int) int64 }).Value(0); got != int64(en.Position-1)*100 {
				t.Errorf("position %d: id %d, want %d", en.Position, got, int64(en.Position-1)*100)
			}
			n++
			return nil
		})
	}()
	<-started
	trimAll(t, e)
	shardDir := filepath.Join(dir, "tables", "t", shardDirName(0))
	if len(recycledFiles(t, shardDir)) != 2 {
		t.Fatalf("kept files: %v", recycledFiles(t, shardDir))
	}
	// Rotate several times: the kept pair must stay unused.
	fill(t, e, int64(len(ps))*100, 30)
	if len(recycledFiles(t, shardDir)) != 2 {
		t.Fatalf("a generation was written over files a read in progress holds: %v", recycledFiles(t, shardDir))
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fill(t, e, 100_000, 30)
	if m := recycledFiles(t, shardDir); len(m) != 0 {
		t.Fatalf("kept files not reused once the read ended: %v", m)
	}
}

// A directory written before generations were salted (WAL1 headers, salt 0
// in every record) opens and reads as it did, sealed and open generations.
func TestUnsaltedGenerationsStillOpen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxGenerationBytes: 6 << 10}
	e := openTest(t, dir, opts)
	mustCreate(t, e, "t", 1)
	ps := fill(t, e, 0, 12)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	idxs, _ := filepath.Glob(filepath.Join(dir, "tables", "t", shardDirName(0), "gen-*.idx"))
	if len(idxs) < 2 {
		t.Fatalf("%d generations; the test needs a sealed and an open one", len(idxs))
	}
	for _, p := range idxs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+recSize <= len(b); i += recSize {
			r, ok := unmarshalRec(b[i:])
			if !ok {
				t.Fatalf("%s: record %d unreadable", p, i/recSize)
			}
			if r.kind == kindHeader2 {
				r.kind = kindHeader
			}
			r.salt = 0
			copy(b[i:], r.marshal())
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e = openTest(t, dir, opts)
	ids := readIDs(t, e, "t", 0, 1, 0)
	if len(ids) != len(ps) {
		t.Fatalf("%d entries read from unsalted generations, want %d", len(ids), len(ps))
	}
	for i, p := range ps {
		if ids[p] != int64(i)*100 {
			t.Fatalf("position %d: id %d, want %d", p, ids[p], int64(i)*100)
		}
	}
	mustAppend(t, e, "t", 0, 5000, 20) // the open WAL1 generation takes appends
}
