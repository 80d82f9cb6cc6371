package lancefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
)

// writerSeeds are valid data files produced by the writer, in both
// formats, with nulls, small pages (several per column) and the 2.1
// full-zip layout.
func writerSeeds(t testing.TB) [][]byte {
	s, err := FromArrow(schema21)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, v := range []Version{V2_0, V2_1} {
		for _, rows := range []int{1, 8} {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, s, Options{Version: v, MaxPageBytes: 512})
			if err != nil {
				t.Fatal(err)
			}
			rec := batch21(5997, rows, false)
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			if _, err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			out = append(out, buf.Bytes())
		}
	}
	return out
}

// FuzzDataFile opens garbage as a data file and reads every column it
// declares: footer, schema, column metadata and pages (DESIGN.md §3 rule
// 18). It must never panic nor allocate beyond what the file's size
// allows, and every refusal is a classified error.
func FuzzDataFile(f *testing.F) {
	for _, seed := range writerSeeds(f) {
		f.Add(seed)
	}
	for _, seed := range officialSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, data)
	})
}

// officialSeeds are data files the official writer (LanceDB 0.31.0, through
// tools/lance-oracle) wrote in file format 2.0 and 2.1 with its default
// encodings and, for fields whose metadata asked, zstd or lz4: bit-packed
// values and definition levels, RLE, FSST, dictionaries, byte stream split,
// general compression and fixed_size_list item validity.
func officialSeeds(t testing.TB) [][]byte {
	paths, err := filepath.Glob(filepath.Join("testdata", "official", "*.lance"))
	if err != nil || len(paths) != 2 {
		t.Fatalf("official seed files: %v (%v)", paths, err)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// readAll opens data as a data file and reads every column; it fails the
// test only on a panic, an unclassified error or a wrong row count, and
// returns how many columns it read.
func readAll(t *testing.T, data []byte) int {
	t.Helper()
	read := 0
	func() {
		// From memory, not a file: a disk round trip per exec halves the
		// exec rate, and the fuzzer's minimizer runs thousands of them per
		// new input (OpenFile differs only in the os.Open and Stat).
		lf, err := openReaderAt(bytes.NewReader(data), int64(len(data)), "fuzz.lance")
		if err != nil {
			classified(t, err)
			return
		}
		defer lf.Close()
		if lf.Rows > 1<<16 {
			// Within ReadColumn's bound (checkDecodedSize) but up to 64 MiB
			// per column: too slow to decode at every exec.
			return
		}
		s, err := FromLance(lf.Fields)
		if err != nil {
			classified(t, err)
			return
		}
		for i, fld := range s.Arrow.Fields() {
			arr, err := lf.ReadColumn(i, fld.Name, fld.Type, memory.DefaultAllocator)
			if err != nil {
				classified(t, err)
				continue
			}
			if uint64(arr.Len()) != lf.Rows {
				t.Fatalf("column %d: %d rows, file says %d", i, arr.Len(), lf.Rows)
			}
			arr.Release()
			read++
		}
	}()
	return read
}

// TestOfficialFilesDamaged reads the official writer's files whole (every
// column decodes), then damaged: truncated, and with bytes overwritten
// across every page of every encoding. A damaged file never panics and
// every refusal is classified; the corruption must also be noticed at
// least once (a reader that ignored its input would not).
func TestOfficialFilesDamaged(t *testing.T) {
	for _, seed := range officialSeeds(t) {
		lf, err := openReaderAt(bytes.NewReader(seed), int64(len(seed)), "official.lance")
		if err != nil {
			t.Fatal(err)
		}
		if n := readAll(t, seed); n != lf.NumColumns() || n < 10 {
			t.Fatalf("official file of %d columns: %d read whole", lf.NumColumns(), n)
		}
		refused := 0
		for at := 0; at < len(seed); at += 509 {
			for _, b := range []byte{0x00, 0xff, 0x7f} {
				bad := bytes.Clone(seed)
				bad[at] ^= b | 1
				if readAll(t, bad) < lf.NumColumns() {
					refused++
				}
			}
		}
		if readAll(t, seed[:len(seed)/2]) != 0 || refused == 0 {
			t.Fatalf("damage went unnoticed: half a file read, %d damaged copies refused", refused)
		}
	}
}

func classified(t *testing.T, err error) {
	t.Helper()
	for _, want := range []error{ErrCorrupt, ErrUnsupported, ErrUnsupportedType, errs.ErrInvalid} {
		if errors.Is(err, want) {
			return
		}
	}
	t.Fatalf("unclassified error on a bad file: %v", err)
}
