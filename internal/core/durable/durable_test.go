package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/walctl/walctl/internal/core/failpoint"
)

func TestCreateExclusiveSecondWriterLoses(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a")
	created, err := CreateExclusive(p, "", []byte("one"))
	if err != nil || !created {
		t.Fatalf("first create: created=%v err=%v", created, err)
	}
	created, err = CreateExclusive(p, "", []byte("two"))
	if err != nil || created {
		t.Fatalf("second create: created=%v err=%v, want false, nil", created, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("content %q, want the first writer's", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestMkdirAllCreatesParents(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		t.Fatalf("stat %s: %v", d, err)
	}
	if err := MkdirAll(d, 0o755); err != nil {
		t.Fatalf("existing directory: %v", err)
	}
	f := filepath.Join(root, "file")
	os.WriteFile(f, nil, 0o644)
	if err := MkdirAll(filepath.Join(f, "x"), 0o755); err == nil {
		t.Fatal("MkdirAll under a file succeeded")
	}
}

func TestWriteAtomicRenameRemove(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c")
	for _, v := range []string{"1", "2"} {
		if err := WriteAtomic(p, []byte(v)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != v {
			t.Fatalf("content %q, want %q", b, v)
		}
	}
	q := filepath.Join(dir, "sub", "c")
	if err := MkdirAll(filepath.Dir(q), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Rename(p, q); err != nil {
		t.Fatal(err)
	}
	if err := Rename(p, q); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rename of a missing file: %v, want ErrNotExist", err)
	}
	if err := Remove(q); err != nil {
		t.Fatal(err)
	}
	if err := Remove(q); err != nil {
		t.Fatalf("remove of a missing file: %v", err)
	}
}

func TestInjectedFaultsLookLikeTheDisk(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(failpoint.Reset)

	if err := failpoint.Enable(FailSync+"=error*1", ""); err != nil {
		t.Fatal(err)
	}
	err := WriteAtomic(filepath.Join(dir, "x"), []byte("x"))
	if !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync fault: %v, want ErrSyncFailed and EIO", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "x")); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("a write whose file fsync failed was renamed into place: %v", serr)
	}

	failpoint.Reset()
	if err := failpoint.Enable(FailWrite+"=error*1", ""); err != nil {
		t.Fatal(err)
	}
	created, err := CreateExclusive(filepath.Join(dir, "y"), "", []byte("y"))
	if created || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write fault: created=%v err=%v, want ENOSPC", created, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files left behind after a failed write: %v", ents)
	}
}
