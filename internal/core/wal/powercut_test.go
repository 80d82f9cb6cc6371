package wal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/apache/arrow-go/v18/arrow"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/testutil/powerfs"
)

// Compound faults on a file system that forgets what was never made
// durable (internal/testutil/powerfs): a process killed at a chosen point,
// the WAL reopened and used, then the power cut. Whatever the WAL
// acknowledged or served before the cut must be there after it, at the same
// position (DESIGN.md §3 rule 22: recovery believes only what is durable).

// powerMount mounts a power-loss file system for the test; it fails (never
// skips) where FUSE is unavailable.
func powerMount(t *testing.T) *powerfs.FS {
	t.Helper()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := powerfs.Mount(mnt, filepath.Join(dir, "state"))
	if err != nil {
		t.Fatalf("%v (these tests need /dev/fuse and root)", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// cutPower cuts the power (nothing torn: every unsynced change is lost).
func cutPower(t *testing.T, f *powerfs.FS) {
	t.Helper()
	if _, err := f.PowerCut(powerfs.CutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// witness is what a WAL told its users: the first id at each position it
// acknowledged or served.
type witness map[uint64]int64

// saw records every entry e serves in table t, shard 0.
func (w witness) saw(t *testing.T, e *Engine) {
	t.Helper()
	for p, id := range readIDs(t, e, "t", 0, 1, 0) {
		if prev, ok := w[p]; ok && prev != id {
			t.Fatalf("position %d served with id %d, earlier with id %d", p, id, prev)
		}
		w[p] = id
	}
}

// check fails unless e still serves every witnessed position with the same
// content, and reports no damage.
func (w witness) check(t *testing.T, e *Engine, when string) {
	t.Helper()
	if d := e.Damage(); len(d) > 0 {
		t.Fatalf("%s: damage reported: %v", when, d)
	}
	got := readIDs(t, e, "t", 0, 1, 0)
	for p, id := range w {
		if got[p] != id {
			t.Fatalf("%s: position %d holds id %d, it was acknowledged or served with id %d (now: %v)", when, p, got[p], id, got)
		}
	}
}

// appendAt appends one record with first id id and records it.
func (w witness) appendAt(t *testing.T, e *Engine, id int64) uint64 {
	t.Helper()
	p := mustAppend(t, e, "t", 0, id, 2)
	w[p] = id
	return p
}

// Child scenarios, run in a re-executed test binary on the mount (a kill
// there leaves its writes in the page cache, as a crashed process does).
const (
	envPowerChild = "WAL_TEST_POWER_CHILD"
	envPowerDir   = "WAL_TEST_POWER_DIR"
)

// TestPowerChild is the child process; it does nothing in a normal run.
func TestPowerChild(t *testing.T) {
	scenario, dir := os.Getenv(envPowerChild), os.Getenv(envPowerDir)
	if scenario == "" {
		return
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...); out.Flush() }
	genBytes := int64(0)
	if scenario == "rotation" {
		genBytes = 1 // every entry gets a generation of its own
	}
	e, err := Open(dir, Options{MaxGenerationAge: -1, MaxGenerationBytes: genBytes})
	if err != nil {
		say("open: %v", err)
		os.Exit(3)
	}
	ctx := context.Background()
	if _, err := e.CreateTable(ctx, "t", testSchema, 1); err != nil {
		say("create: %v", err)
		os.Exit(3)
	}
	appendOne := func(id int64) {
		rec := makeRecord(id, 2)
		defer rec.Release()
		pos, err := e.Append(ctx, "t", 0, rec)
		if err != nil {
			say("append: %v", err)
			os.Exit(4)
		}
		say("acked %d %d", pos, id)
	}
	switch scenario {
	case "kill-before-sync", "rotation":
		for i := int64(1); i <= 4; i++ {
			appendOne(100 * i)
		}
		// Killed at the next file fsync: the entry is written, not durable.
		failpoint.Enable(durable.FailSync+"=kill@0", "")
		appendOne(500)
	case "epoch":
		appendOne(100)
		// Killed at the directory fsync after the new epoch's rename.
		failpoint.Enable(durable.FailSync+"=kill@1", "")
		e.AdvanceEpoch(ctx, "t", 0)
	}
	say("not killed")
	os.Exit(5)
}

// runKilledChild runs scenario in a child on dir and returns what it
// acknowledged; the child must die by the kill its failpoint fires.
func runKilledChild(t *testing.T, scenario, dir string) witness {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envPowerChild+"="+scenario, envPowerDir+"="+dir)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.ExitCode() != -1 {
		t.Fatalf("child %s was not killed: %v; output:\n%s", scenario, err, out)
	}
	w := witness{}
	for _, line := range strings.Split(string(out), "\n") {
		var p uint64
		var id int64
		if _, err := fmt.Sscanf(line, "acked %d %d", &p, &id); err == nil {
			w[p] = id
		}
	}
	return w
}

// TestKillBeforeSyncThenPowerCut: a process is killed after writing an
// entry and before its fdatasync; the WAL reopened serves it; the power is
// cut. What was served must survive: recovery makes it durable before
// serving it, and a later append must not get its position again.
func TestKillBeforeSyncThenPowerCut(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	w := runKilledChild(t, "kill-before-sync", dir)
	e := openTest(t, dir, Options{})
	w.saw(t, e)
	if w[5] != 500 {
		t.Fatalf("fixture: the unsynced entry is not served after the restart: %v", w)
	}
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, Options{})
	w.check(t, e, "after the power cut")
	if p := w.appendAt(t, e, 600); p != 6 {
		t.Fatalf("append after the cut got position %d, want 6", p)
	}
}

// TestKillDuringRotationThenPowerCut: killed during the sync that covers a
// rotation (the closed generation's end-of-stream marker and the new
// generation written, nothing synced); reopened, appended to, then the
// power cut. The closed generation's seal finished at recovery must
// describe a durable stream, and the acknowledged append must survive.
func TestKillDuringRotationThenPowerCut(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	w := runKilledChild(t, "rotation", dir)
	e := openTest(t, dir, Options{MaxGenerationBytes: 1})
	w.saw(t, e)
	w.appendAt(t, e, 700)
	w.saw(t, e)
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, Options{MaxGenerationBytes: 1})
	w.check(t, e, "after the power cut")
	last := uint64(0)
	for p := range w {
		last = max(last, p)
	}
	if p := w.appendAt(t, e, 800); p != last+1 {
		t.Fatalf("append after the cut got position %d, want %d (positions served before: %v)", p, last+1, w)
	}
}

// TestFailedFsyncThenReopenThenPowerCut: an fdatasync fails with Linux's
// semantics (the pages stay in the cache, clean, never written); the WAL
// is reopened in the same boot, appended to, and the power cut. The entry
// the failed sync covered was never acknowledged: it must not be served
// after the reopen (it would vanish at the cut), and what is acknowledged
// after the reopen must survive.
func TestFailedFsyncThenReopenThenPowerCut(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	w := witness{}
	w.appendAt(t, e, 100)
	// Both files' fdatasyncs fail: the data, and the index with the
	// synced record written before the entry's record.
	f.FailSync(func(rel string) bool { return strings.Contains(rel, "shard-0000/") }, -1)
	rec := makeRecord(200, 2)
	defer rec.Release()
	if _, err := e.Append(context.Background(), "t", 0, rec); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("append whose fdatasync fails: %v", err)
	}
	if f.SyncFailures() == 0 {
		t.Fatal("the planned fsync failure never fired")
	}
	e.Close()
	f.FailSync(nil, 0)
	e = openTest(t, dir, Options{})
	w.saw(t, e)
	w.appendAt(t, e, 300)
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, Options{})
	w.check(t, e, "after the power cut")
}

// TestEpochAnsweredAfterRestartIsDurable: killed after the rename of a new
// epoch and before the directory fsync; after the restart the epoch answered
// must survive a power cut, and a trim with the fenced epoch must still be
// refused.
func TestEpochAnsweredAfterRestartIsDurable(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	runKilledChild(t, "epoch", dir)
	ctx := context.Background()
	e := openTest(t, dir, Options{})
	answered, err := e.Epoch(ctx, "t")
	if err != nil || answered != 1 {
		t.Fatalf("epoch after the restart: %d, %v; want 1", answered, err)
	}
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, Options{})
	if ep, err := e.Epoch(ctx, "t"); err != nil || ep != answered {
		t.Fatalf("epoch after the power cut: %d, %v; %d was answered before it", ep, err, answered)
	}
	if _, err := e.Trim(ctx, "t", 0, 1, 0); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("trim with the fenced epoch 0 after the cut: %v, want ErrStaleEpoch", err)
	}
}

// TestFailedEpochDirSyncIsNotBelieved: the directory fsync after the new
// epoch's rename fails in a live process. The epoch is then unknown: the
// call fails, and so do later epoch reads, CASes and trims (the file is not
// read back and believed). Reopened, the WAL answers only what it made
// durable, and that survives a power cut.
func TestFailedEpochDirSyncIsNotBelieved(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	ctx := context.Background()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	f.FailSync(func(rel string) bool { return rel == "wal/tables/t" }, 1)
	if _, err := e.AdvanceEpoch(ctx, "t", 0); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("advance whose directory fsync fails: %v", err)
	}
	if ep, err := e.Epoch(ctx, "t"); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("epoch after a failed epoch fsync: %d, %v; want the sync failure", ep, err)
	}
	if _, err := e.Trim(ctx, "t", 0, 1, 0); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("trim after a failed epoch fsync: %v", err)
	}
	e.Close()
	e = openTest(t, dir, Options{})
	answered, err := e.Epoch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, Options{})
	if ep, err := e.Epoch(ctx, "t"); err != nil || ep != answered {
		t.Fatalf("epoch after the power cut: %d, %v; %d was answered before it", ep, err, answered)
	}
}

// TestFailedSyncDuringRecoveryThenReopenThenPowerCut: a process is killed
// before its fdatasync (or during the sync covering a rotation); the next
// open's own sync of what it found fails (Linux: those pages are now clean,
// never written) — of the open generation's files, or of the closed
// generation's data before its seal is completed. An open after that in
// the same boot would sync "successfully" and serve them, or make a seal
// record durable over a stream that is not; it must refuse the shard
// instead, naming the record of the failure. After a reboot the record
// goes and the shard is recovered from what the disk holds.
func TestFailedSyncDuringRecoveryThenReopenThenPowerCut(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		fail     func(rel string) bool
		opts     Options
	}{
		{"kill-before-sync", func(rel string) bool { return strings.Contains(rel, "shard-0000/gen-") }, Options{}},
		{"rotation", func(rel string) bool { return strings.HasSuffix(rel, ".arrows") }, Options{MaxGenerationBytes: 1}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			f := powerMount(t)
			dir := filepath.Join(f.Dir(), "wal")
			w := runKilledChild(t, tc.scenario, dir)
			f.FailSync(tc.fail, -1)
			e := openTest(t, dir, tc.opts)
			if d := e.Damage(); len(d) != 1 || !strings.Contains(d[0].Detail, "fsync") {
				t.Fatalf("open whose sync fails: damage %v, want the shard refused", d)
			}
			e.Close()
			f.FailSync(nil, 0)
			e = openTest(t, dir, tc.opts)
			record := filepath.Join(dir, "tables", "t", shardDirName(0), syncFailedName())
			if d := e.Damage(); len(d) != 1 || d[0].File != record {
				t.Fatalf("open in the same boot after a failed recovery sync: damage %v, want the shard refused naming %s", d, record)
			}
			rec := makeRecord(900, 1)
			defer rec.Release()
			if _, err := e.Append(context.Background(), "t", 0, rec); !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("append to the refused shard: %v", err)
			}
			e.Close()
			cutPower(t, f)
			defer func(old func() string) { bootID = old }(bootID)
			bootID = func() string { return "another boot" }
			e = openTest(t, dir, tc.opts)
			delete(w, 5) // never acknowledged nor served: it may be gone
			w.check(t, e, "after the power cut and a reboot")
			if p := w.appendAt(t, e, 600); p != 5 {
				t.Fatalf("append after the reboot got position %d, want 5", p)
			}
		})
	}
}

// TestFailedRenameSyncKeepsDurableStream: one sync covers generation A
// (positions 1..3, its end-of-stream marker written) and the first entry
// of B; B is renamed, positions 1..3 are acknowledged, and the directory
// sync that would make B's name durable fails. The failed sync must not cut
// what the completed one made durable (A's end-of-stream marker): B's name,
// in the page cache, proves A's stream whole to the reopened WAL in the
// same boot, and a cut stream would then be reported as damage.
func TestFailedRenameSyncKeepsDurableStream(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	size := entryBytes(t)
	opts := Options{MaxGenerationBytes: prefixLen(t) + 3*size}
	e := openTest(t, dir, opts)
	mustCreate(t, e, "t", 1)
	f.FailSync(func(rel string) bool { return rel == "wal/tables/t/shard-0000" }, 1)
	var recs []arrow.RecordBatch
	for i := int64(1); i <= 4; i++ {
		recs = append(recs, makeRecord(100*i, 3))
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if _, err := e.AppendBatch(context.Background(), "t", 0, recs); !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("batch whose rename sync fails: %v", err)
	}
	if f.SyncFailures() != 1 {
		t.Fatalf("the planned directory sync failure fired %d times", f.SyncFailures())
	}
	e.Close()
	e = openTest(t, dir, opts)
	w := witness{}
	w.saw(t, e)
	w.check(t, e, "reopened in the same boot")
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, opts)
	w.check(t, e, "after the power cut")
}

// TestFailedSyncAfterSyncWithWriteInFlight: a sync completes while a later
// append has its place in the file but has not written it yet; that append
// then writes, and the sync covering it fails (Linux: its pages clean,
// never written). What the completed sync made durable ends before the
// in-flight append: the failed sync must cut the append out of the page
// cache, or a reopen in the same boot serves it and a power cut takes it.
func TestFailedSyncAfterSyncWithWriteInFlight(t *testing.T) {
	f := powerMount(t)
	dir := filepath.Join(f.Dir(), "wal")
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	w := witness{}
	w.appendAt(t, e, 100)
	reserved2, reserved3, release3 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	testHookReserved = func(pos uint64) {
		switch pos {
		case 2:
			close(reserved2)
			<-reserved3 // position 3 is reserved before 2 is written and synced
		case 3:
			close(reserved3)
			<-release3
		}
	}
	defer func() { testHookReserved = nil }()
	ctx := context.Background()
	second := make(chan error, 1)
	go func() {
		rec := makeRecord(200, 2)
		defer rec.Release()
		_, err := e.Append(ctx, "t", 0, rec)
		second <- err
	}()
	<-reserved2
	third := make(chan error, 1)
	go func() {
		rec := makeRecord(300, 2)
		defer rec.Release()
		_, err := e.Append(ctx, "t", 0, rec)
		third <- err
	}()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	w[2] = 200
	f.FailSync(func(rel string) bool { return strings.Contains(rel, "shard-0000/") }, -1)
	close(release3)
	if err := <-third; !errors.Is(err, durable.ErrSyncFailed) {
		t.Fatalf("the append whose sync fails: %v", err)
	}
	e.Close()
	f.FailSync(nil, 0)
	e = openTest(t, dir, Options{})
	w.saw(t, e)
	e.Close()
	cutPower(t, f)
	e = openTest(t, dir, Options{})
	w.check(t, e, "after the power cut")
}
