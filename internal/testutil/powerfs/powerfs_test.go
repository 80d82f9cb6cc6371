package powerfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// mount mounts a power-loss file system for the test; it fails (never
// skips) where FUSE is unavailable.
func mount(t *testing.T) *FS {
	t.Helper()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(mnt, filepath.Join(dir, "state"))
	if err != nil {
		t.Fatalf("%v (the power-loss tests need /dev/fuse and root)", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func cut(t *testing.T, f *FS) *Loss {
	t.Helper()
	l, err := f.PowerCut(CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// tornCut cuts the power with tearing drawn from seed.
func tornCut(t *testing.T, f *FS, seed uint64) {
	t.Helper()
	if _, err := f.PowerCut(CutOptions{Tear: rand.New(rand.NewPCG(seed, 1))}); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string, sync bool) {
	t.Helper()
	fl, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	if _, err := fl.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fl.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func syncDir(t *testing.T, path string) {
	t.Helper()
	d, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// content is the file's content, or "<absent>".
func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func want(t *testing.T, path, w string) {
	t.Helper()
	if got := content(t, path); got != w {
		t.Errorf("%s after the cut: %q, want %q", filepath.Base(path), got, w)
	}
}

func TestWriteWithoutFsyncIsLost(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	write(t, p, "durable", true)
	syncDir(t, f.Dir())
	write(t, p, "+lost", false)
	l := cut(t, f)
	want(t, p, "durable")
	if len(l.RolledBack) != 1 || !strings.HasPrefix(l.RolledBack[0], "a ") {
		t.Errorf("loss %+v, want a rolled back", l)
	}
	// The surviving tree is a file system like any other: it takes writes
	// and loses the unsynced ones again.
	write(t, p, "+again", true)
	write(t, p, "+lost", false)
	cut(t, f)
	want(t, p, "durable+again")
}

func TestNeverSyncedFileIsEmpty(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	write(t, p, "lost", false)
	syncDir(t, f.Dir())
	cut(t, f)
	want(t, p, "")
}

func TestFsyncedFileWithoutDirSyncIsLost(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "new")
	write(t, p, "synced", true)
	l := cut(t, f)
	want(t, p, "<absent>")
	if !slices.Equal(l.Vanished, []string{"new"}) {
		t.Errorf("vanished %v, want [new]", l.Vanished)
	}
}

func TestFsyncOfFileAndDirSurvives(t *testing.T) {
	f := mount(t)
	d := filepath.Join(f.Dir(), "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	p := filepath.Join(d, "f")
	write(t, p, "synced", true)
	syncDir(t, d)
	if l := cut(t, f); !l.Empty() {
		t.Errorf("a fully synced tree lost:\n%s", l)
	}
	want(t, p, "synced")
}

func TestUnsyncedMkdirLosesItsWholeSubtree(t *testing.T) {
	f := mount(t)
	d := filepath.Join(f.Dir(), "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "f")
	write(t, p, "synced", true)
	syncDir(t, d) // d's names are durable, d itself is not
	l := cut(t, f)
	want(t, p, "<absent>")
	if !slices.Equal(l.Vanished, []string{"d/"}) {
		t.Errorf("vanished %v, want [d/]", l.Vanished)
	}
}

func TestRenameWithoutDirSyncKeepsOldName(t *testing.T) {
	f := mount(t)
	old, nu := filepath.Join(f.Dir(), "tmp"), filepath.Join(f.Dir(), "final")
	write(t, old, "v1", true)
	syncDir(t, f.Dir())
	if err := os.Rename(old, nu); err != nil {
		t.Fatal(err)
	}
	l := cut(t, f)
	want(t, old, "v1")
	want(t, nu, "<absent>")
	if !slices.Equal(l.Vanished, []string{"final"}) || !slices.Equal(l.Revived, []string{"tmp"}) {
		t.Errorf("loss %+v", l)
	}

	// With the directory synced, the rename survives.
	if err := os.Rename(old, nu); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	cut(t, f)
	want(t, old, "<absent>")
	want(t, nu, "v1")
}

func TestRenameOverKeepsReplacedFileUntilDirSync(t *testing.T) {
	f := mount(t)
	a, b := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	write(t, a, "new", true)
	write(t, b, "old", true)
	syncDir(t, f.Dir())
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	cut(t, f)
	want(t, a, "new")
	want(t, b, "old")
}

func TestUnlinkIsDurableOnlyAfterDirSync(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	write(t, p, "data", true)
	syncDir(t, f.Dir())
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	cut(t, f)
	want(t, p, "data")

	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	cut(t, f)
	want(t, p, "<absent>")
}

func TestLinkOfSyncedTempFile(t *testing.T) {
	f := mount(t)
	tmp, final := filepath.Join(f.Dir(), "tmp"), filepath.Join(f.Dir(), "final")
	write(t, tmp, "record", true)
	if err := os.Link(tmp, final); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	cut(t, f)
	want(t, final, "record")
	want(t, tmp, "<absent>")
}

func TestOverwriteAndTruncateRollBackToLastFsync(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	write(t, p, "0123456789", true)
	syncDir(t, f.Dir())
	fl, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	// A synced overwrite of the middle, after a truncation that is synced
	// with it: bytes cut and not rewritten read back as zeros.
	if err := fl.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.WriteAt([]byte("XY"), 6); err != nil {
		t.Fatal(err)
	}
	if err := fl.Sync(); err != nil {
		t.Fatal(err)
	}
	// Unsynced: a truncation and an overwrite.
	if err := fl.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.WriteAt([]byte("zz"), 0); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	cut(t, f)
	want(t, p, "0123\x00\x00XY")
}

func TestFdatasyncMakesAppendsDurable(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "log")
	write(t, p, "", true)
	syncDir(t, f.Dir())
	fl, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	for _, s := range []string{"a", "b", "c"} {
		if _, err := fl.WriteString(s); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Fdatasync(int(fl.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fl.WriteString("lost"); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	cut(t, f)
	want(t, p, "abc")
}
