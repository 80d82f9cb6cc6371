package qualify

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is a walctl process started by a test.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	logs string // its stderr file
}

// baseEnv is the test's environment without any WALCTL_ setting, plus env.
func baseEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALCTL_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// start runs walctl args in the background; its output goes to files in dir.
func start(t *testing.T, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(walctlBin, args...)
	cmd.Env = env
	out, err := os.Create(filepath.Join(dir, name+".stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(filepath.Join(dir, name+".stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{}), logs: errf.Name()}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		errf.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits (up to a minute) for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.kill()
		p.t.Fatalf("%s did not stop on SIGTERM", p.name)
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		p.t.Fatalf("%s: %v", p.name, p.err)
	}
	if p.err != nil {
		p.t.Fatalf("%s exited with %v; stderr:\n%s", p.name, p.err, tail(p.logs))
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// walctl runs walctl args to completion and returns stdout, stderr and the
// exit code.
func walctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(walctlBin, args...)
	cmd.Env = env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("walctl %v: %v", args, err)
	return "", "", -1
}

// waitFile waits until path exists (or the deadline, or p exits).
func waitFile(t *testing.T, path string, d time.Duration, p *proc) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if p != nil && p.exited() {
			t.Fatalf("%s exited before %s appeared: %v\n%s", p.name, path, p.err, tail(p.logs))
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
