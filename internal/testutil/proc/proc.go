package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

// DefaultWaitTimeout bounds Wait and the readiness waits unless the Runner
// sets its own. It is a deadline, not synchronisation: each wait ends as
// soon as its condition holds.
const DefaultWaitTimeout = 60 * time.Second

// Runner starts the processes of one test: one binary, one directory for
// their environment (HOME, XDG_*, data dir, failpoint directories), and
// environment entries given to every process.
type Runner struct {
	Bin string
	Dir string
	// Env is appended to IsolatedEnv(Dir) for every process.
	Env []string
	// WaitTimeout bounds Wait and WaitFile (DefaultWaitTimeout when 0).
	WaitTimeout time.Duration

	seq atomic.Int64
}

// NewRunner returns a runner of bin whose processes live under dir.
func NewRunner(bin, dir string, env ...string) *Runner {
	return &Runner{Bin: bin, Dir: dir, Env: env}
}

func (r *Runner) timeout() time.Duration {
	if r.WaitTimeout > 0 {
		return r.WaitTimeout
	}
	return DefaultWaitTimeout
}

// Start starts the binary with args; env (NAME=value) is added last. Each
// process gets a failpoint directory of its own (WALCTL_FAILPOINT_DIR) for
// pause actions. The process is SIGKILLed when t ends if it still runs.
func (r *Runner) Start(t testing.TB, name string, env []string, args ...string) *Proc {
	t.Helper()
	fpDir := filepath.Join(r.Dir, "fp", fmt.Sprintf("%s-%d", name, r.seq.Add(1)))
	if err := os.MkdirAll(fpDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(r.Bin, args...)
	cmd.Env = IsolatedEnv(r.Dir, append(append([]string{"WALCTL_FAILPOINT_DIR=" + fpDir}, r.Env...), env...)...)
	// A group of its own, so that KillGroup also ends its children (a
	// master's executors) and a terminal's signals reach only the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Name: name, Args: args, FailpointDir: fpDir, t: t, timeout: r.timeout(), cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.KillGroup)
	return p
}

// Run runs the binary to completion (within the wait timeout).
func (r *Runner) Run(t testing.TB, name string, env []string, args ...string) Result {
	t.Helper()
	return r.Start(t, name, env, args...).Wait()
}

// Proc is one running (or ended) process.
type Proc struct {
	Name string
	Args []string
	// FailpointDir is where the process's failpoint pauses meet the test.
	FailpointDir string

	t       testing.TB
	timeout time.Duration
	cmd     *exec.Cmd
	stdout  walctlbin.SyncBuffer
	stderr  walctlbin.SyncBuffer
	done    chan struct{}
	waitErr error
}

// Result is how a process ended.
type Result struct {
	Code   int            // exit code; -1 when killed by a signal
	Signal syscall.Signal // the signal that killed it, if any
	Stdout string
	Stderr string
	// MaxRSS is the process's peak resident set in bytes (getrusage's
	// maxrss, the kernel's VmHWM at exit).
	MaxRSS int64
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d (signal %v)\nstdout:\n%s\nstderr:\n%s", r.Code, r.Signal, tail(r.Stdout), tail(r.Stderr))
}

// tail keeps the last 16 KiB of a process's output for a failure message.
func tail(s string) string {
	const max = 16 << 10
	if len(s) <= max {
		return s
	}
	return "…" + s[len(s)-max:]
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has ended and its output is complete.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stdout and Stderr return what the process has written so far.
func (p *Proc) Stdout() string { return p.stdout.String() }

// Stderr returns what the process has written to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Wait waits, within the runner's wait timeout, for the process to end; it
// kills the process and fails the test when the timeout passes.
func (p *Proc) Wait() Result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(p.timeout):
		p.Kill()
		p.t.Fatalf("%s (%s) did not end within %s; stderr:\n%s", p.Name, strings.Join(p.Args, " "), p.timeout, tail(p.Stderr()))
	}
	return p.result()
}

func (p *Proc) result() Result {
	r := Result{Code: p.cmd.ProcessState.ExitCode(), Stdout: p.Stdout(), Stderr: p.Stderr()}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal()
	}
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// Kill SIGKILLs the process if it still runs (also when it is stopped) and
// waits until it is gone.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// KillGroup SIGKILLs the process's whole process group — it and every
// child it started, also those that outlived it — and waits until the
// process is gone.
func (p *Proc) KillGroup() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// Stop pauses the process (SIGSTOP) and returns once /proc shows it
// stopped: a signal is delivered asynchronously, and a request sent right
// after kill(2) could still be served. Cont lets it go on.
func (p *Proc) Stop() {
	p.t.Helper()
	p.Signal(syscall.SIGSTOP)
	p.waitStopped(true)
}

// Cont resumes a process paused by Stop (SIGCONT) and returns once it is
// no longer stopped.
func (p *Proc) Cont() {
	p.t.Helper()
	p.Signal(syscall.SIGCONT)
	p.waitStopped(false)
}

func (p *Proc) waitStopped(stopped bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultWaitTimeout)
	defer cancel()
	if err := WaitForState(ctx, p.Pid(), stopped, p.done); err != nil && !errors.Is(err, ErrGone) {
		p.t.Fatalf("%s: %v", p.Name, err)
	}
}

// State is process pid's state letter in /proc (R, S, D, T, Z, …).
func State(pid int) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", err
	}
	// "pid (comm) STATE …": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || len(strings.Fields(string(b[i+1:]))) == 0 {
		return "", fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return strings.Fields(string(b[i+1:]))[0], nil
}

// Terminate asks the process to end (SIGTERM) and waits up to grace for it;
// then it is killed. It returns how the process ended.
func (p *Proc) Terminate(grace time.Duration) Result {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.Kill()
		}
	}
	return p.result()
}

// Signal sends sig to a running process; a process that has already ended
// is left alone.
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if p.Exited() {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !p.Exited() {
		p.t.Fatalf("%s: signal %v: %v", p.Name, sig, err)
	}
}

// WaitPaused waits until the process is paused at failpoint name and checks
// that the pause file names it.
func (p *Proc) WaitPaused(name string) {
	p.t.Helper()
	pid := p.WaitFile(filepath.Join(p.FailpointDir, name+".paused"))
	if pid != strconv.Itoa(p.Pid()) {
		p.t.Fatalf("%s: %s.paused names pid %s, want %d", p.Name, name, pid, p.Pid())
	}
}

// Resume lets a process paused at failpoint name go on.
func (p *Proc) Resume(name string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.FailpointDir, name+".resume"), nil, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
