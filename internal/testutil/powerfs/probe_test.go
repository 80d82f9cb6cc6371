package powerfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The probes of issue #30: each shows that the model now produces an
// outcome of a power cut that ext4 and xfs produce and the model used to
// rule out (L1–L4), and that it produces nothing else.

// tree lists the names under root: directories end in "/", symbolic links
// show their target.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			rel += "/"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel += " -> " + target
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// L1: a torn cut keeps an in-order prefix of the name operations not made
// durable by a directory fsync, across directories and kinds of operation,
// and names survive apart from their data.
func TestTornCutKeepsPrefixOfNameOps(t *testing.T) {
	f := mount(t)
	const rounds = 24
	kept := map[int]bool{}
	renamedWithoutData := false
	for seed := range uint64(rounds) {
		r := filepath.Join(f.Dir(), "r"+strconv.FormatUint(seed, 10))
		must(t, os.Mkdir(r, 0o755))
		syncDir(t, f.Dir())
		// A name made durable by a directory fsync always survives.
		write(t, filepath.Join(r, "p"), "synced", true)
		syncDir(t, r)
		at := func(name string) string { return filepath.Join(r, name) }
		ops := []func() error{
			func() error { write(t, at("a"), "never synced", false); return nil },
			func() error { return os.Mkdir(at("d"), 0o755) },
			func() error { return os.Rename(at("a"), at("d/a")) },
			func() error { write(t, at("b"), "synced", true); return nil },
			func() error { return os.Link(at("b"), at("c")) },
			func() error { return os.Remove(at("b")) },
			func() error { return os.Symlink("c", at("s")) },
			func() error { return os.Rename(at("c"), at("d/a")) }, // replaces d/a
			func() error { return os.Remove(at("p")) },
		}
		states := [][]string{tree(t, r)}
		for _, op := range ops {
			must(t, op())
			states = append(states, tree(t, r))
		}
		tornCut(t, f, seed)
		got := tree(t, r)
		k := slices.IndexFunc(states, func(s []string) bool { return slices.Equal(s, got) })
		if k < 0 {
			t.Fatalf("seed %d: names after the cut %q are not those after any prefix of the operations", seed, got)
		}
		kept[k] = true
		// Content is independent of names: the synced file reads as synced
		// under any name, the never synced one empty or torn.
		for _, name := range []string{"p", "b", "c"} {
			if c := content(t, at(name)); c != "<absent>" && c != "synced" {
				t.Errorf("seed %d, %s: %q, want what was synced", seed, name, c)
			}
		}
		switch c := content(t, at("d/a")); {
		case k >= 8:
			if c != "synced" {
				t.Errorf("seed %d: d/a replaced by c: %q, want what was synced", seed, c)
			}
		case k >= 3:
			renamedWithoutData = renamedWithoutData || c == ""
		}
	}
	if !renamedWithoutData {
		t.Errorf("%d torn cuts never kept the rename of a file without its data", rounds)
	}
	if len(kept) < 5 {
		t.Errorf("%d torn cuts kept only the prefixes %v", rounds, kept)
	}
}

// L2: a file truncated since its last fsync is torn too: the truncation
// commits or not, and what was written after it reaches the disk or not.
func TestTornCutTearsTruncation(t *testing.T) {
	f := mount(t)
	durable := strings.Repeat("A", 2*pageSize)
	// Truncated to 1000 bytes, then 2000 bytes written at its end.
	live := durable[:1000] + strings.Repeat("B", 2000)
	// What the page cache holds past the live end, and where the
	// truncation cut, if it committed.
	zeros := strings.Repeat("\x00", len(durable))
	liveCache, cutDurable := live+zeros, durable[:1000]+zeros
	outcomes := map[string]bool{}
	for seed := range uint64(24) {
		p := filepath.Join(f.Dir(), "f"+strconv.FormatUint(seed, 10))
		write(t, p, durable, true)
		syncDir(t, f.Dir())
		fl, err := os.OpenFile(p, os.O_RDWR, 0)
		must(t, err)
		must(t, fl.Truncate(1000))
		_, err = fl.WriteAt([]byte(live[1000:]), 1000)
		must(t, err)
		must(t, fl.Close())
		tornCut(t, f, seed)
		got := content(t, p)
		var kind string
		switch {
		case got == durable:
			kind = "durable"
		case got == live:
			kind = "live"
		case len(got) == len(durable):
			// Not committed: only the page holding the truncation point
			// was overwritten in place, each sector with what the page
			// cache held (the new bytes, zeros past them) or not.
			checkSectors(t, seed, got[:pageSize], durable, liveCache)
			if got[pageSize:] != durable[pageSize:] {
				t.Fatalf("seed %d: truncation not committed, yet the page past its point changed", seed)
			}
			kind = "torn, truncation not committed"
		case got == durable[:1000]:
			kind = "truncated, new bytes lost"
		case len(got) > 1000 && len(got) <= len(live):
			// Committed: the bytes it cut read as zeros unless rewritten.
			checkSectors(t, seed, got, cutDurable, live)
			kind = "torn, truncation committed"
		default:
			t.Fatalf("seed %d: %d bytes: neither the durable size nor one between the truncation's and the live one", seed, len(got))
		}
		outcomes[kind] = true
	}
	for _, o := range []string{"durable", "truncated, new bytes lost", "torn, truncation not committed", "torn, truncation committed"} {
		if !outcomes[o] {
			t.Errorf("24 torn cuts of a truncated file never gave %q: %v", o, outcomes)
		}
	}
}

// checkSectors checks that every sector of got is all from old or all from
// new (two versions of the file, each at least as long as got) and that
// got holds nothing else.
func checkSectors(t *testing.T, seed uint64, got, old, new string) {
	t.Helper()
	for off := 0; off < len(got); off += sectorSize {
		end := min(off+sectorSize, len(got))
		if s := got[off:end]; s != old[off:end] && s != new[off:end] {
			t.Fatalf("seed %d: sector at %d is %q…, neither old %q… nor new %q…", seed, off, s[:8], old[off:off+8], new[off:off+8])
		}
	}
}

// L3: a torn cut leaves sizes on sector boundaries and (rarely) anywhere,
// and tears pages sector by sector.
func TestTornCutSizesAndSectors(t *testing.T) {
	f := mount(t)
	durable := strings.Repeat("a", 2*pageSize)
	live := durable + strings.Repeat("b", 2*pageSize+pageSize/2)
	seen := map[string]bool{}
	for seed := range uint64(32) {
		p := filepath.Join(f.Dir(), "f"+strconv.FormatUint(seed, 10))
		write(t, p, durable, true)
		syncDir(t, f.Dir())
		write(t, p, live[len(durable):], false)
		tornCut(t, f, seed)
		got := content(t, p)
		switch n := len(got); {
		case n == len(durable):
			seen["durable size"] = true
		case n == len(live):
			seen["live size"] = true
		case n < len(durable) || n > len(live):
			t.Fatalf("seed %d: size %d, outside [%d, %d]", seed, n, len(durable), len(live))
		case n%pageSize == 0:
			seen["page boundary"] = true
		case n%sectorSize == 0:
			seen["sector boundary"] = true
		default:
			seen["inside a sector"] = true
		}
		// Sizes beyond the data that survived read as zeros.
		checkSectors(t, seed, got, durable+strings.Repeat("\x00", len(live)), live)
		for off := len(durable); off+pageSize <= len(got); off += pageSize {
			if page := got[off : off+pageSize]; strings.Contains(page, "b") && strings.Contains(page, "\x00") {
				seen["torn page"] = true
			}
		}
	}
	for _, s := range []string{"durable size", "live size", "sector boundary", "inside a sector", "torn page"} {
		if !seen[s] {
			t.Errorf("32 torn cuts never gave this outcome: %s (they gave %v)", s, seen)
		}
	}
}

// L4: a failed fsync loses the data dirty at that moment (Linux marks it
// clean), which reads keep returning until the cut, and a later fsync
// succeeds without making it durable.
func TestFailedFsyncLosesDirtyData(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	write(t, p, "old!", true)
	syncDir(t, f.Dir())
	fl, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer fl.Close()
	_, err = fl.WriteAt([]byte("new!"), 0)
	must(t, err)
	f.FailSync(func(rel string) bool { return rel == "a" }, 1)
	if err := fl.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync: %v, want EIO", err)
	}
	if n := f.SyncFailures(); n != 1 {
		t.Errorf("SyncFailures %d, want 1", n)
	}
	want(t, p, "new!") // from the page cache
	if err := fl.Sync(); err != nil {
		t.Fatalf("fsync after the failure: %v", err)
	}
	_, err = fl.WriteAt([]byte("more"), 4)
	must(t, err)
	must(t, fl.Sync())
	fl.Close()
	cut(t, f)
	want(t, p, "old!more")

	// A torn cut never keeps what a failed fsync dropped either; the
	// failure is planned here for a process other than the test.
	f.FailSync(func(rel string) bool { return rel == "a" }, -1)
	for seed := range uint64(8) {
		fl, err := os.OpenFile(p, os.O_WRONLY, 0)
		must(t, err)
		_, err = fl.WriteAt([]byte("new!"), 0)
		must(t, err)
		must(t, fl.Close())
		out, err := exec.Command("sync", p).CombinedOutput()
		if !strings.Contains(string(out), "Input/output error") {
			t.Fatalf("sync %s in another process: %v, %s; want EIO", p, err, out)
		}
		tornCut(t, f, seed)
		want(t, p, "old!more")
	}
	if n := f.SyncFailures(); n != 8 {
		t.Errorf("SyncFailures %d, want 8", n)
	}
}

// L4: a failed directory fsync makes no name durable; a later one does.
// Failures planned until cleared hold across cuts and fdatasync.
func TestFailedDirFsync(t *testing.T) {
	f := mount(t)
	d := filepath.Join(f.Dir(), "d")
	must(t, os.Mkdir(d, 0o755))
	syncDir(t, f.Dir())
	p := filepath.Join(d, "f")
	write(t, p, "data", true)
	f.FailSync(func(rel string) bool { return rel == "d" }, 1)
	dir, err := os.Open(d)
	must(t, err)
	if err := dir.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("directory fsync: %v, want EIO", err)
	}
	dir.Close()
	cut(t, f)
	want(t, p, "<absent>")

	write(t, p, "data", true)
	syncDir(t, d) // the plan is used up
	cut(t, f)
	want(t, p, "data")

	f.FailSync(func(rel string) bool { return rel == "d/f" }, -1)
	for range 2 {
		write(t, p, "+lost", false)
		fl, err := os.OpenFile(p, os.O_WRONLY, 0)
		must(t, err)
		if err := syscall.Fdatasync(int(fl.Fd())); err != syscall.EIO {
			t.Fatalf("fdatasync: %v, want EIO", err)
		}
		fl.Close()
		cut(t, f)
	}
	if n := f.SyncFailures(); n != 2 {
		t.Errorf("SyncFailures %d, want 2", n)
	}
	f.FailSync(nil, 0)
	if n := f.SyncFailures(); n != 0 {
		t.Errorf("SyncFailures %d after clearing, want 0", n)
	}
	write(t, p, "+kept", true)
	cut(t, f)
	want(t, p, "data+kept")
}
