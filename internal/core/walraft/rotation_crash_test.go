package walraft

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/wal"
)

const (
	envRotationChild = "WALRAFT_TEST_ROTATION_CHILD" // the child's FSM directory
	envRotationFP    = "WALRAFT_TEST_ROTATION_FP"    // its failpoint directory
)

// TestRotationChild is the child of TestAppendKilledDuringRotationIsApplied;
// it does nothing in a normal run.
func TestRotationChild(t *testing.T) {
	dir := os.Getenv(envRotationChild)
	if dir == "" {
		return
	}
	f, err := openFSM(dir, wal.Options{MaxGenerationBytes: 1}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(createLog(t, 1))
	if r := f.Apply(appendLog(t, 2, 10)).(result); r.err != nil || r.pos != 1 {
		t.Fatalf("%+v", r)
	}
	failpoint.Enable(durable.FailSync+"=pause", os.Getenv(envRotationFP))
	f.Apply(appendLog(t, 3, 11)) // rotates; killed in the engine's group sync
	os.Exit(5)
}

// TestAppendKilledDuringRotationIsApplied: a replica is SIGKILLed while
// applying an append that rotates the shard's generation, during the
// engine's group sync. Recovery removes the new generation (no sync covered
// it) and completes the seal of the old one; restarted, the replica must
// apply the append again — at the position every other replica gave it —
// and not take the changed seal for the append having landed.
func TestAppendKilledDuringRotationIsApplied(t *testing.T) {
	dir, fpDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRotationChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRotationChild+"="+dir, envRotationFP+"="+fpDir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	paused := filepath.Join(fpDir, durable.FailSync+".paused")
	waitPaused := func() {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(paused); err == nil {
				os.Remove(paused)
				return
			}
		}
		cmd.Process.Kill()
		t.Fatal("the child never paused at its fsync")
	}
	waitPaused() // the progress record's fdatasync
	if err := os.WriteFile(filepath.Join(fpDir, durable.FailSync+".resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPaused() // the engine's group sync covering the rotation
	syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	f, err := openFSM(dir, wal.Options{MaxGenerationBytes: 1}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	f.Apply(createLog(t, 1))
	f.Apply(appendLog(t, 2, 10))
	r3 := f.Apply(appendLog(t, 3, 11)).(result)
	r4 := f.Apply(appendLog(t, 4, 12)).(result)
	if r3.err != nil || r3.pos != 2 || r4.err != nil || r4.pos != 3 {
		t.Fatalf("replayed raft index 3: %+v, index 4: %+v; want positions 2 and 3, as on every replica", r3, r4)
	}
}
