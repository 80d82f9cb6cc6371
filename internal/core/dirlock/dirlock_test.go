package dirlock

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSecondAcquireInProcessRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks are per open file description: a second open in the same
	// process conflicts too, which is what we want for two engines.
	_, err = Acquire(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second acquire: got %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("error %q does not name holder pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	l2.Release()
}

// TestOtherProcessRefused holds the lock in a child process and checks that
// this process is refused with the child's pid, then acquires once it exits.
func TestOtherProcessRefused(t *testing.T) {
	if os.Getenv("DIRLOCK_HOLD") != "" {
		l, err := Acquire(os.Getenv("DIRLOCK_HOLD"))
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		buf := make([]byte, 1)
		os.Stdin.Read(buf) // hold until the parent closes stdin
		l.Release()
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=TestOtherProcessRefused")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child did not take the lock: %q %v", buf, err)
	}
	_, err := Acquire(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("got %v, want ErrLocked naming pid %d", err, cmd.Process.Pid)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("acquire after holder exit: %v", err)
	}
	l.Release()
}

// WaitReleased fires when the holder releases (here in-process: flock
// conflicts between open file descriptions of one process too), not before,
// and leaves the directory free for the next Acquire.
func TestWaitReleased(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := Holder(dir); got != strconv.Itoa(os.Getpid()) {
		t.Fatalf("Holder = %q, want %d", got, os.Getpid())
	}
	ch, err := WaitReleased(dir)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("WaitReleased fired while the lock is held")
	case <-time.After(200 * time.Millisecond):
	}
	l.Release()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("WaitReleased did not fire after the release")
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("acquire after the watch: %v", err)
	}
	l2.Release()
}
