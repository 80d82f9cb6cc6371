package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/walctl/walctl/internal/testutil/proc"
)

// event is a fault's injection or its recovery (end of the hold).
type event struct {
	at      time.Duration
	f       fault
	recover bool
}

func timeline(sched []fault) []event {
	var evs []event
	for _, f := range sched {
		evs = append(evs, event{at: f.At, f: f})
		if f.Hold > 0 {
			evs = append(evs, event{at: f.At + f.Hold, f: f, recover: true})
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int { return int(a.at - b.at) })
	return evs
}

// execute runs the schedule's events at their times and returns the
// one-shot publishers it started. Recoveries due after the phase are left
// to quiesce.
func (s *system) execute(sched []fault, phase time.Duration) ([]*proc.Proc, []event, error) {
	start := time.Now()
	var pubs []*proc.Proc
	evs := timeline(sched)
	for i, ev := range evs {
		if ev.at > phase {
			return pubs, evs[i:], nil
		}
		if err := s.supervise(start.Add(ev.at)); err != nil {
			return pubs, nil, err
		}
		p, err := s.apply(ev)
		if err != nil {
			return pubs, nil, fmt.Errorf("%s: %w", ev.f, err)
		}
		if p != nil {
			pubs = append(pubs, p)
		}
	}
	// The load runs on to the end of the phase.
	return pubs, nil, s.supervise(start.Add(phase))
}

// supervise waits until the deadline, restarting (as systemd or Kubernetes
// would) any member that ended by itself meanwhile — a daemon that gives up
// when etcd is away, say. A member killed by the schedule stays dead for
// its hold.
func (s *system) supervise(until time.Time) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(until) {
		for _, name := range s.order {
			m := s.members[name]
			if m.killed || m.p == nil || !m.p.Exited() {
				continue
			}
			r := m.p.Wait()
			if r.Code == 6 {
				return fmt.Errorf("%s exited 6 (data integrity): %s", name, r)
			}
			s.notes = append(s.notes, fmt.Sprintf("%s ended by itself (exit %d) and was restarted", name, r.Code))
			// An injected fault fires once: the restarted process runs clean.
			if err := s.restart(name, ""); err != nil {
				return err
			}
		}
		select {
		case <-tick.C:
		case <-time.After(time.Until(until)):
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	return nil
}

// apply injects a fault or ends it.
func (s *system) apply(ev event) (*proc.Proc, error) {
	f := ev.f
	switch f.Kind {
	case Publish, PublishKill:
		var env []string
		if f.Spec != "" {
			env = []string{"WALCTL_FAILPOINTS=" + f.Spec}
		}
		return s.walctl.Start(s.t, "publish-"+f.Target, env, "--data-dir", s.procDir("publish"),
			"publish", "--table", f.Target, "--output", "json"), nil
	}
	if f.Kind == KillExec || f.Kind == StopExec {
		return nil, s.signalExecutor(ev)
	}
	m := s.members[f.Target]
	switch {
	case f.Kind == StopWorker || f.Kind == StopWAL || f.Kind == StopEtcd || f.Kind == StopMaster:
		if ev.recover {
			m.p.Cont()
		} else {
			m.p.Stop()
		}
		m.stopped = !ev.recover
		return nil, nil
	case f.Kind == IOWorker || f.Kind == IOWAL:
		if ev.recover {
			return nil, s.restart(f.Target, "")
		}
		return nil, s.restart(f.Target, f.Spec)
	}
	// Kills: the member stays dead for the hold, then starts again.
	if ev.recover {
		return nil, s.restart(f.Target, "")
	}
	m.p.Kill()
	m.killed = true
	return nil, nil
}

// quiesce ends every fault: the recoveries still due are applied, stopped
// members continue, members that died on their own or run with failpoints
// start again clean. It returns what it had to repair beyond the schedule.
func (s *system) quiesce(due []event) ([]string, error) {
	notes := s.notes
	for _, ev := range due {
		if ev.recover {
			if _, err := s.apply(ev); err != nil {
				return notes, fmt.Errorf("%s: %w", ev.f, err)
			}
		}
	}
	for _, pid := range s.execStopped {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	s.execStopped = nil
	for _, name := range s.order {
		m := s.members[name]
		if m.stopped {
			m.p.Cont()
			m.stopped = false
		}
		if m.p.Exited() || m.failpoints != "" {
			if m.p.Exited() && m.failpoints == "" {
				r := m.p.Wait()
				notes = append(notes, fmt.Sprintf("%s ended by itself (exit %d) and was restarted", name, r.Code))
				if r.Code == 6 {
					return notes, fmt.Errorf("%s exited 6 (data integrity): %s", name, r)
				}
			}
			if err := s.restart(name, ""); err != nil {
				return notes, err
			}
		}
	}
	return notes, nil
}

// sealAll seals every shard, retrying while the WAL server comes back.
func (s *system) sealAll(l *load) error {
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	for _, table := range tables {
		for shard := 0; shard < 2; shard++ {
			for {
				cctx, ccancel := context.WithTimeout(ctx, commandTimeout)
				_, err := l.cli.Seal(cctx, table, shard)
				ccancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return fmt.Errorf("seal %s shard %d: %w", table, shard, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	return nil
}

// published reports whether every shard of table is trimmed through its
// last position: all sealed work is published and durable.
func (s *system) published(l *load, table string) bool {
	ctx, cancel := context.WithTimeout(s.ctx, commandTimeout)
	defer cancel()
	st, err := l.cli.Stats(ctx, table, nil)
	if err != nil {
		return false
	}
	for _, sh := range st.Shards {
		if sh.TrimmedThrough != sh.LastPosition {
			return false
		}
	}
	return true
}

// waitPublished waits up to d for the workers to publish everything; a
// table still behind then gets one `walctl publish --all`, retried while
// its claim is held. It returns the tables not published in the end.
func (s *system) waitPublished(l *load, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(tables, func(t string) bool { return !s.published(l, t) }) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	var behind []string
	for _, table := range tables {
		if s.published(l, table) {
			continue
		}
		for try := 0; try < 10; try++ {
			r := s.walctl.Run(s.t, "final-publish", nil, "--data-dir", s.procDir("publish"), "publish", "--table", table, "--all", "--output", "json")
			if r.Code == 0 || r.Signal == syscall.SIGKILL {
				break
			}
			time.Sleep(claimTTL)
		}
		if !s.published(l, table) {
			behind = append(behind, table)
		}
	}
	return behind
}

// signalExecutor applies an executor fault to a running `catchup run`
// (a child of the master, or one orphaned by a killed master: both stay in
// the master's process group). With none running the fault is a no-op,
// counted apart.
func (s *system) signalExecutor(ev event) error {
	if ev.recover {
		for _, pid := range s.execStopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		s.execStopped = nil
		return nil
	}
	// Executors come and go: wait up to 2 s for one.
	var execs []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if execs = executors(s.members["master"].p.Pid()); len(execs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			s.execMissed++
			return nil
		}
	}
	pid := execs[0]
	if ev.f.Kind == KillExec {
		return ignoreGone(syscall.Kill(pid, syscall.SIGKILL))
	}
	s.execStopped = append(s.execStopped, pid)
	return ignoreGone(syscall.Kill(pid, syscall.SIGSTOP))
}

func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
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
