// Package localrunner is the catch-up Runner of the embedded default: each
// Job is a `walctl catchup run …` child process of the master.
//
// A Job's UID is "<pid>-<start>", start being the process's start time in
// clock ticks since boot (/proc/<pid>/stat field 22), so it names exactly
// one process even after the pid is reused. The resourceVersion is always
// "1": a process has no mutable spec. The runner keeps no state of its own
// across master restarts — only what the etcd records say: Get,
// PodsTerminal and Terminate find a predecessor's process by the UID
// recorded in etcd, so its slot stays held while it runs and a termination
// reaches it; once it has exited its outcome is unknown (ErrJobNotFound,
// which the controller counts as a failure).
package localrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// DefaultGrace is how long a terminated executor has between SIGTERM and
// SIGKILL.
const DefaultGrace = 30 * time.Second

// Config configures a Runner.
type Config struct {
	// Executable is the walctl binary (default os.Executable()).
	Executable string
	// GlobalArgs come before the Job's own arguments (data dir, etcd
	// endpoints, Lance root: what points the child at the master's
	// dependencies).
	GlobalArgs []string
	// Env is added to the master's environment for every child.
	Env []string
	// DropEnv names variables of the master's environment a child must not
	// inherit (the master's API token).
	DropEnv []string
	// LogDir receives one <job>.log per Job (stdout and stderr).
	LogDir string
	// Grace between SIGTERM and SIGKILL (DefaultGrace if <= 0).
	Grace  time.Duration
	Clock  clock.Clock
	Logger *slog.Logger
}

// Runner starts executors as child processes. It is safe for concurrent
// use and idempotent by Job name, as catchup.Runner requires.
type Runner struct {
	cfg   Config
	mu    sync.Mutex
	procs map[string]*proc
}

type proc struct {
	ref        catchup.JobRef
	pid        int
	done       chan struct{} // closed when the process has exited and been reaped
	exitCode   int
	exitedAt   time.Time
	terminated bool // Terminate accepted: the Job is gone for Get
}

var _ catchup.Runner = (*Runner)(nil)

// New returns a runner. The executable defaults to this process's own.
func New(cfg Config) (*Runner, error) {
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("local catch-up runner: find walctl executable: %w", err)
		}
		cfg.Executable = exe
	}
	if cfg.LogDir == "" {
		return nil, fmt.Errorf("local catch-up runner: no log directory: %w", errs.ErrInvalid)
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("local catch-up runner: %w", err)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, procs: map[string]*proc{}}, nil
}

// Create implements catchup.Runner: it starts `walctl <global args>
// catchup run <spec.Args()>` unless a live process (or one not yet
// terminated) already has the name, whose identity it then returns — one
// of this runner's, or one another master of the same fleet (same etcd
// endpoints and prefix) started on this machine and did not live to
// record (found in /proc, as Kubernetes would answer AlreadyExists). A
// start is never ambiguous: either the process exists or Create failed.
func (r *Runner) Create(_ context.Context, spec catchup.JobSpec) (catchup.JobRef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.procs[spec.Name]; ok && !p.terminated {
		return p.ref, nil
	}
	if ref, ok := r.running(spec.Name); ok {
		r.cfg.Logger.Info("catch-up process of another master adopted", "job", spec.Name, "uid", ref.UID)
		return ref, nil
	}
	logf, err := os.OpenFile(filepath.Join(r.cfg.LogDir, spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return catchup.JobRef{}, fmt.Errorf("catch-up job %s: open log: %w", spec.Name, err)
	}
	defer logf.Close()
	cmd := exec.Command(r.cfg.Executable, append(append([]string{}, r.cfg.GlobalArgs...), spec.Args()...)...)
	cmd.Env = append(r.inherited(), r.cfg.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return catchup.JobRef{}, fmt.Errorf("catch-up job %s: start %s: %v: %w", spec.Name, r.cfg.Executable, err, errs.ErrUnavailable)
	}
	pid := cmd.Process.Pid
	start, err := startTime(pid)
	if err != nil {
		start = uint64(r.cfg.Clock.Now().UnixNano()) // no /proc: unique enough for this master's lifetime
	}
	p := &proc{ref: catchup.JobRef{Name: spec.Name, UID: fmt.Sprintf("%d-%d", pid, start), ResourceVersion: "1"},
		pid: pid, done: make(chan struct{})}
	r.procs[spec.Name] = p
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		r.mu.Lock()
		p.exitCode, p.exitedAt = code, r.cfg.Clock.Now()
		r.mu.Unlock()
		close(p.done)
		r.cfg.Logger.Info("catch-up process exited", "job", spec.Name, "pid", pid, "exit_code", code)
	}()
	r.cfg.Logger.Info("catch-up process started", "job", spec.Name, "pid", pid, "uid", p.ref.UID, "table", spec.Table)
	return p.ref, nil
}

// inherited is the master's environment without DropEnv.
func (r *Runner) inherited() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(r.cfg.DropEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}

// Get implements catchup.Runner. A process this runner started that exited
// 0 succeeded, any other exit failed. A process an earlier master started
// is found by the UID recorded in etcd: active while it runs, and
// catchup.ErrJobNotFound once it has exited (its exit code was its parent's
// to read). A terminated Job is catchup.ErrJobNotFound.
func (r *Runner) Get(_ context.Context, ref catchup.JobRef) (catchup.JobStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[ref.Name]
	switch {
	case ok && p.terminated:
		return catchup.JobStatus{}, fmt.Errorf("catch-up process %s was terminated: %w", ref.Name, catchup.ErrJobNotFound)
	case ok && (ref.UID == "" || ref.UID == p.ref.UID):
		st := catchup.JobStatus{Ref: p.ref, State: catchup.JobActive}
		select {
		case <-p.done:
			st.State, st.Detail, st.FinishedAt = catchup.JobFailed, fmt.Sprintf("exit code %d", p.exitCode), p.exitedAt
			if p.exitCode == 0 {
				st.State = catchup.JobSucceeded
			}
		default:
		}
		return st, nil
	case ref.UID != "" && alive(ref):
		return catchup.JobStatus{Ref: ref, State: catchup.JobActive}, nil
	}
	return catchup.JobStatus{}, fmt.Errorf("catch-up process %s (uid %q) is not running: %w", ref.Name, ref.UID, catchup.ErrJobNotFound)
}

// Terminate implements catchup.Runner: guarded by the UID (pid and start
// time), it sends SIGTERM and, if the process has not exited after the
// grace, SIGKILL. A process already gone is catchup.ErrJobNotFound; a
// different process under the name, catchup.ErrJobPrecondition.
func (r *Runner) Terminate(_ context.Context, ref catchup.JobRef) error {
	r.mu.Lock()
	p, ok := r.procs[ref.Name]
	if ok && p.ref.UID != ref.UID {
		r.mu.Unlock()
		return fmt.Errorf("catch-up process %s is uid %s, not %s: %w", ref.Name, p.ref.UID, ref.UID, catchup.ErrJobPrecondition)
	}
	if ok && ref.ResourceVersion != p.ref.ResourceVersion {
		r.mu.Unlock()
		return fmt.Errorf("catch-up process %s is at resourceVersion %s, not %s: %w", ref.Name, p.ref.ResourceVersion, ref.ResourceVersion, catchup.ErrJobPrecondition)
	}
	if ok {
		p.terminated = true
	}
	r.mu.Unlock()
	if !ok {
		return r.terminateOrphan(ref)
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("catch-up process %s: SIGTERM: %w", ref.Name, err)
	}
	go r.killAfterGrace(ref, p.done)
	r.cfg.Logger.Info("catch-up process terminating", "job", ref.Name, "pid", p.pid, "grace", r.cfg.Grace)
	return nil
}

// killAfterGrace sends SIGKILL when done is not closed within the grace.
func (r *Runner) killAfterGrace(ref catchup.JobRef, done <-chan struct{}) {
	t := r.cfg.Clock.NewTimer(r.cfg.Grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		if alive(ref) {
			pid, _, _ := parseUID(ref.UID)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			r.cfg.Logger.Warn("catch-up process killed after the grace", "job", ref.Name, "pid", pid)
		}
	}
}

// PodsTerminal implements catchup.Runner: true once the process named by
// ref's UID has exited (or never existed).
func (r *Runner) PodsTerminal(_ context.Context, ref catchup.JobRef) (bool, error) {
	r.mu.Lock()
	p, ok := r.procs[ref.Name]
	r.mu.Unlock()
	if ok && p.ref.UID == ref.UID {
		select {
		case <-p.done:
			return true, nil
		default:
			return false, nil
		}
	}
	return !alive(ref), nil
}

// startTime reads a process's start time (clock ticks since boot) from
// /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesised and may hold spaces:
	// fields are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unparsable", pid)
	}
	fields := strings.Fields(s[i+1:])
	const startField = 22 - 3 // field 22; fields[0] is field 3
	if len(fields) <= startField {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return strconv.ParseUint(fields[startField], 10, 64)
}

func parseUID(uid string) (int, uint64, error) {
	p, s, ok := strings.Cut(uid, "-")
	if !ok {
		return 0, 0, fmt.Errorf("uid %q is not <pid>-<start>", uid)
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("uid %q: bad pid", uid)
	}
	start, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("uid %q: bad start time", uid)
	}
	return pid, start, nil
}

// alive reports whether the exact process ref's UID names still runs (a
// zombie counts as exited: it runs nothing).
func alive(ref catchup.JobRef) bool {
	pid, start, err := parseUID(ref.UID)
	if err != nil {
		return false
	}
	got, err := startTime(pid)
	if err != nil || got != start {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] == 'Z' {
		return false
	}
	return true
}

// terminateOrphan signals a process started by an earlier master, found
// by the UID recorded in etcd; the pid alone is never trusted.
func (r *Runner) terminateOrphan(ref catchup.JobRef) error {
	if !alive(ref) {
		return fmt.Errorf("catch-up process %s (uid %s) has exited: %w", ref.Name, ref.UID, catchup.ErrJobNotFound)
	}
	pid, _, _ := parseUID(ref.UID)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("catch-up process %s: %w", ref.Name, catchup.ErrJobNotFound)
		}
		return fmt.Errorf("catch-up process %s: SIGTERM: %w", ref.Name, err)
	}
	go r.killAfterGrace(ref, nil)
	r.cfg.Logger.Info("orphaned catch-up process terminating", "job", ref.Name, "pid", pid, "grace", r.cfg.Grace)
	return nil
}

// running finds a live executor process of this fleet for job: its
// command line has `catchup run`, `--job job`, and the etcd endpoints and
// prefix of this runner's GlobalArgs (so another fleet's Job of the same
// name on this machine is never taken for it).
func (r *Runner) running(job string) (catchup.JobRef, bool) {
	want := map[string]string{"--job": job}
	for i := 0; i+1 < len(r.cfg.GlobalArgs); i++ {
		if a := r.cfg.GlobalArgs[i]; a == "--etcd-endpoints" || a == "--etcd-prefix" {
			want[a] = r.cfg.GlobalArgs[i+1]
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return catchup.JobRef{}, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !matchArgs(strings.Split(string(b), "\x00"), want) {
			continue
		}
		start, err := startTime(pid)
		if err != nil {
			continue
		}
		ref := catchup.JobRef{Name: job, UID: fmt.Sprintf("%d-%d", pid, start), ResourceVersion: "1"}
		if alive(ref) {
			return ref, true
		}
	}
	return catchup.JobRef{}, false
}

// matchArgs reports whether argv runs `catchup run` with every flag of
// want at its value.
func matchArgs(argv []string, want map[string]string) bool {
	run, got := false, 0
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "catchup" && argv[i+1] == "run" {
			run = true
		}
		if v, ok := want[argv[i]]; ok && argv[i+1] == v {
			got++
		}
	}
	return run && got == len(want)
}
