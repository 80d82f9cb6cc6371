// Package dirlock gives a process exclusive use of a directory (DESIGN.md §3
// rule 11). The lock is an advisory flock(2) on <dir>/LOCK, which the kernel
// drops when the holder dies, so a SIGKILLed holder never leaves a stale lock.
// The holder's pid is written into the file so that a refused process can name
// it.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/walctl/walctl/internal/core/errs"
)

// FileName is the name of the lock file inside a locked directory.
const FileName = "LOCK"

// ErrLocked is returned when another process holds the directory.
var ErrLocked = fmt.Errorf("directory locked by another process: %w", errs.ErrConflict)

// Lock is a held directory lock.
type Lock struct {
	dir string
	f   *os.File
}

// Acquire creates dir if needed and locks it without waiting. When another
// process holds it, the error wraps ErrLocked and names the holder's pid.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by pid %s (lock file %s): %w", dir, holder(path), path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		_ = f.Sync()
	}
	return &Lock{dir: dir, f: f}, nil
}

// Dir is the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Release drops the lock. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	pid := strings.TrimSpace(string(b))
	if pid == "" {
		return "unknown"
	}
	return pid
}

// Holder returns the pid written by the process holding dir's lock, or
// "unknown".
func Holder(dir string) string { return holder(filepath.Join(dir, FileName)) }

// WaitReleased returns a channel that is closed once no process holds dir's
// lock any more: the holder released it or died (the kernel drops a dead
// holder's flock). It is a watch, not a poll: a goroutine blocks in
// flock(2) for a shared lock, which it drops at once. That goroutine ends
// only when the lock is free, so a caller that stops caring just stops
// reading the channel. A dir that is not locked closes the channel at once.
func WaitReleased(dir string) (<-chan struct{}, error) {
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("watch lock of %s: %w", dir, err)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer f.Close() // also drops the shared lock
		for {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
			if !errors.Is(err, syscall.EINTR) {
				return
			}
		}
	}()
	return ch, nil
}
