package qualify

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// walctlBin is the walctl binary built once by TestMain.
var walctlBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "qualify:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "walctl-qualify-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "qualify:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	walctlBin = filepath.Join(dir, "walctl")
	build := exec.Command("go", "build", "-o", walctlBin, "./cmd/walctl")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "qualify: building walctl:", err)
		return 1
	}
	return m.Run()
}

func moduleRoot() (string, error) {
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
