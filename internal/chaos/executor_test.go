package chaos

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// execWait is how long an executor fault waits for an executor to run.
const execWait = 30 * time.Second

// execFault is an executor fault in flight. Executors come and go, so it
// waits in the background (the schedule goes on) up to execWait for one:
// a `catchup run` child of the master, or one orphaned by a killed master
// (it stays in that master's process group). A stopped one continues after
// the fault's hold, counted from when it was found. None in that time: the
// fault did not fire.
type execFault struct {
	f    fault
	pid  int // the executor signalled, once done
	done chan struct{}
}

// startExecFault starts f (kill-executor or stop-executor); pgids lists
// the process groups of the masters started so far.
func startExecFault(f fault, pgids func() []int) *execFault {
	e := &execFault{f: f, done: make(chan struct{})}
	sig := syscall.SIGKILL
	if f.Kind == StopExec {
		sig = syscall.SIGSTOP
	}
	go func() {
		defer close(e.done)
		for deadline := time.Now().Add(execWait); time.Now().Before(deadline) && e.pid == 0; time.Sleep(50 * time.Millisecond) {
			for _, pgid := range pgids() {
				for _, pid := range executors(pgid) {
					// One that ended meanwhile fails: look again.
					if e.pid == 0 && syscall.Kill(pid, sig) == nil {
						e.pid = pid
					}
				}
			}
		}
		if e.pid != 0 && sig == syscall.SIGSTOP {
			time.Sleep(f.Hold)
			_ = syscall.Kill(e.pid, syscall.SIGCONT)
		}
	}()
	return e
}

// wait waits for the fault to end and reports whether it fired.
func (e *execFault) wait() bool {
	<-e.done
	return e.pid != 0
}

// executors lists the live processes of process group pgid other than its
// leader: the master's executors.
func executors(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp …"
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}
