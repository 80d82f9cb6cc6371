package writeback

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}

// Every byte lands where one WriteAt would put it, whatever the length
// against the piece size.
func TestWriteAtWritesEveryPiece(t *testing.T) {
	for _, n := range []int{0, 1, Piece - 1, Piece, Piece + 1, 3*Piece + Piece/2} {
		path := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		const off = 4096 + 17
		want := pattern(n)
		got, err := WriteAt(f, want, off)
		f.Close()
		if err != nil || got != n {
			t.Fatalf("%d bytes: wrote %d, %v", n, got, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && (len(data) != off+n || !bytes.Equal(data[off:], want)) {
			t.Fatalf("%d bytes: the file holds %d bytes, content equal: %v", n, len(data), len(data) == off+n && bytes.Equal(data[off:], want))
		}
	}
}

// A failing write stops at once and reports it.
func TestWriteAtReportsTheFirstError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read-only
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := WriteAt(f, pattern(2*Piece), 0)
	if err == nil || n != 0 {
		t.Fatalf("write to a read-only file: %d bytes, %v", n, err)
	}
}
