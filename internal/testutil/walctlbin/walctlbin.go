// Package walctlbin builds the walctl binary once for test packages that run
// it as real processes (fault, recovery and end-to-end tests).
package walctlbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Main builds walctl into a temporary directory, stores its path in *bin,
// runs the package's tests and exits with their status. A failed build fails
// the package.
func Main(m *testing.M, bin *string) {
	os.Exit(run(m, bin))
}

func run(m *testing.M, bin *string) int {
	root, err := ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "walctlbin:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "walctl-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "walctlbin:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "walctl")
	build := exec.Command("go", "build", "-o", *bin, "./cmd/walctl")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "walctlbin: building walctl:", err)
		return 1
	}
	return m.Run()
}

// ModuleRoot walks up from the working directory to the directory of go.mod.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// SyncBuffer is a bytes.Buffer safe to read while a child process writes it
// (as its Stdout or Stderr).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
