package proc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A developer's configuration never reaches a child: WALCTL_*, HOME and
// XDG_* are replaced by directories of the test.
func TestIsolatedEnvDropsTheDevelopersSettings(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/home/dev/.config")
	t.Setenv("WALCTL_ETCD_ENDPOINTS", "prod:2379")
	t.Setenv("HOME", "/home/dev")
	dir := t.TempDir()
	env := IsolatedEnv(dir, "WALCTL_LOG_LEVEL=debug")
	get := func(k string) []string {
		var vs []string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				vs = append(vs, v)
			}
		}
		return vs
	}
	for k, want := range map[string]string{
		"XDG_CONFIG_HOME": filepath.Join(dir, "xdg", "config"), "HOME": filepath.Join(dir, "home"),
		"WALCTL_DATA_DIR": filepath.Join(dir, "data"), "WALCTL_LOG_LEVEL": "debug",
	} {
		if vs := get(k); len(vs) != 1 || vs[0] != want {
			t.Errorf("%s = %v, want [%s]", k, vs, want)
		}
	}
	if vs := get("WALCTL_ETCD_ENDPOINTS"); len(vs) != 0 {
		t.Errorf("WALCTL_ETCD_ENDPOINTS leaked: %v", vs)
	}
}

// Stop freezes a process and returns once it is stopped, Cont resumes it,
// Kill ends it by SIGKILL; the output written before is captured.
func TestStopContKill(t *testing.T) {
	dir := t.TempDir()
	r := NewRunner("/bin/sh", dir)
	ready := filepath.Join(dir, "ready")
	p := r.Start(t, "sh", nil, "-c", `echo hello; echo $$ > `+ready+`; exec sleep 60`)
	p.WaitFile(ready)
	p.Stop() // returns once stopped
	stateIs(t, p.Pid(), true)
	p.Cont()
	stateIs(t, p.Pid(), false)
	p.Kill()
	res := p.Wait()
	if res.Signal != syscall.SIGKILL || res.Code != -1 || strings.TrimSpace(res.Stdout) != "hello" {
		t.Fatalf("after Kill: %s", res)
	}
}

// stateIs checks process pid's state in /proc.
func stateIs(t *testing.T, pid int, stopped bool) {
	t.Helper()
	st, err := State(pid)
	if err != nil || (st == "T") != stopped {
		t.Fatalf("process %d in state %s (%v), want stopped=%v", pid, st, err, stopped)
	}
}

// WaitForFile returns ErrGone when the writer ends without the file.
func TestWaitForFileGone(t *testing.T) {
	dir := t.TempDir()
	p := NewRunner("/bin/sh", dir).Start(t, "sh", nil, "-c", "exit 3")
	_, err := WaitForFile(context.Background(), filepath.Join(dir, "never"), p.Done())
	if !errors.Is(err, ErrGone) {
		t.Fatalf("WaitForFile: %v, want ErrGone", err)
	}
	if r := p.Wait(); r.Code != 3 {
		t.Fatalf("exit code: %s", r)
	}
}

// Crash finds the runtime's own crash reports, not log lines that mention
// a panic.
func TestCrash(t *testing.T) {
	for stderr, want := range map[string]string{
		"time=x level=INFO msg=ok\npanic: runtime error: index out of range\n\ngoroutine 1 [running]:": "panic: runtime error: index out of range",
		"fatal error: concurrent map writes\n":                                                         "fatal error: concurrent map writes",
		"==================\nWARNING: DATA RACE\nWrite at":                                             "WARNING: DATA RACE",
		"time=x level=ERROR msg=\"round failed\" err=\"panic: no\"":                                    "",
		"": "",
	} {
		if got := Crash(stderr); got != want {
			t.Errorf("Crash(%q) = %q, want %q", stderr, got, want)
		}
	}
}
