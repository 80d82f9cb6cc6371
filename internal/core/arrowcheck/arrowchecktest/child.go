package arrowchecktest

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// childEnv names the test a child process of InChild runs.
const childEnv = "ARROWCHECKTEST_CHILD"

// ChildHeadroom is the address space a child of InChild may add to what it
// has mapped when it starts.
const ChildHeadroom = 4 << 30

// InChild runs the calling test (or subtest) again in a child process
// whose address space is limited (RLIMIT_AS) to what it has mapped plus
// ChildHeadroom, and reports whether the caller is that child. The child
// runs the test's body; the parent returns false once the child is done,
// having failed t if the child failed — a decoder that allocates what a
// hostile stream declares dies there with "fatal error: runtime: out of
// memory", the same on every machine (overcommitting or not), and the
// machine's memory stays untouched.
func InChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		if err := limitAddressSpace(ChildHeadroom); err != nil {
			t.Fatal(err)
		}
		return true
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v\n%s%s", err, fatal(out), tail(out))
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("child process did not run %s:\n%s", t.Name(), tail(out))
	}
	return false
}

// fatal is the runtime's fatal error or panic line of a child's output.
func fatal(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") {
			return l + "\n…\n"
		}
	}
	return ""
}

func tail(b []byte) []byte {
	const max = 2 << 10
	if len(b) > max {
		return append([]byte("…"), b[len(b)-max:]...)
	}
	return b
}

// limitAddressSpace sets RLIMIT_AS to the mapped size plus headroom.
func limitAddressSpace(headroom uint64) error {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return fmt.Errorf("VmSize %q: %v", v, err)
			}
			var lim syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil {
				return err
			}
			lim.Cur = kb<<10 + headroom
			return syscall.Setrlimit(syscall.RLIMIT_AS, &lim)
		}
	}
	return fmt.Errorf("no VmSize in /proc/self/status")
}

// LimitFuzzWorker limits a fuzzing worker's address space as InChild
// limits its child (once; outside `go test -fuzz`, nothing): an input that
// makes a decoder allocate what it declares then crashes the worker and is
// reported, instead of passing where the machine overcommits.
func LimitFuzzWorker(t *testing.T) {
	limitOnce.Do(func() {
		if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
			limitErr = limitAddressSpace(ChildHeadroom)
		}
	})
	if limitErr != nil {
		t.Fatal(limitErr)
	}
}

var (
	limitOnce sync.Once
	limitErr  error
)

// Allocated runs f and returns the bytes the process allocated meanwhile
// (runtime.MemStats.TotalAlloc): what a decode asked of the Go heap,
// through an Arrow allocator or not.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
