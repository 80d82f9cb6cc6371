package chaos

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/testutil/proc"
)

// Every schedule compacts and cleans under its faults (issue 30), and fails
// a worker's fsync (issue 31): before, no schedule did. Excluding a kind is
// honoured.
func TestScheduleCompactsAndCleans(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		sched := schedule(seed, 10*time.Second, 8, 3, nil)
		has := func(kinds ...string) bool {
			return slices.ContainsFunc(sched, func(f fault) bool { return slices.Contains(kinds, f.Kind) })
		}
		if !has(Compact, CompactKill) || !has(Clean, CleanKill) || !has(FsyncWorker) {
			t.Fatalf("seed %d: no compaction, no clean or no failed fsync:\n%s", seed, formatSchedule(sched))
		}
		for _, f := range sched {
			if (f.Kind == CompactKill || f.Kind == CleanKill) && !strings.HasSuffix(f.Spec, "=kill*1") {
				t.Fatalf("seed %d: %s without a kill point", seed, f)
			}
		}
		if s := schedule(seed, 10*time.Second, 8, 3, []string{Compact, CompactKill, Clean, CleanKill}); slices.ContainsFunc(s, func(f fault) bool {
			return slices.Contains([]string{Compact, CompactKill, Clean, CleanKill}, f.Kind)
		}) {
			t.Fatalf("seed %d: excluded kinds scheduled:\n%s", seed, formatSchedule(s))
		}
	}
}

// A member that ends by itself used to be restarted with a note, whatever
// its end: a panic, exit 1, or exit 0 of a daemon passed. Now only an end
// its own injected fault or a recent dependency fault explains passes.
func TestMemberEndsJudged(t *testing.T) {
	oldRule := func(proc.Result) bool { return true }
	long := 2 * depGrace
	for _, tc := range []struct {
		name     string
		r        proc.Result
		armed    bool
		sinceDep time.Duration
		want     bool
	}{
		{"panic", proc.Result{Code: 2, Stderr: "panic: runtime error: invalid memory address\n\ngoroutine 7 [running]:"}, false, time.Second, false},
		{"panic while armed", proc.Result{Code: 2, Stderr: "failpoint: injected error\npanic: boom"}, true, time.Second, false},
		{"exit 1", proc.Result{Code: 1}, false, time.Second, false},
		{"a daemon exits 0", proc.Result{Code: 0}, false, long, false},
		{"killed by a signal nobody sent", proc.Result{Code: -1, Signal: syscall.SIGSEGV}, false, long, false},
		{"unavailable long after any dependency fault", proc.Result{Code: 5}, false, long, false},
		{"unavailable right after etcd was stopped", proc.Result{Code: 5}, false, time.Second, true},
		{"its injected fault", proc.Result{Code: 1, Stderr: "level=ERROR err=\"failpoint: injected error at durable-fsync\""}, true, long, true},
	} {
		if !oldRule(tc.r) {
			t.Fatal("unreachable")
		}
		if got := endExplained(tc.r, tc.armed, tc.sinceDep); got != tc.want {
			t.Errorf("%s: endExplained = %v, want %v", tc.name, got, tc.want)
		}
	}
}
