package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
		// A stopped executor's hold starts when one is found (execFault).
		if f.Hold > 0 && f.Kind != StopExec {
			evs = append(evs, event{at: f.At + f.Hold, f: f, recover: true})
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int { return int(a.at - b.at) })
	return evs
}

// execute runs the schedule's events at their times, starting one-shots
// in the background. Recoveries due after the phase are left to quiesce.
func (s *system) execute(sched []fault, phase time.Duration) ([]event, error) {
	start := time.Now()
	evs := timeline(sched)
	for i, ev := range evs {
		if ev.at > phase {
			return evs[i:], nil
		}
		if err := s.supervise(start.Add(ev.at)); err != nil {
			return nil, err
		}
		if err := s.apply(ev); err != nil {
			return nil, fmt.Errorf("%s: %w", ev.f, err)
		}
	}
	// The load runs on to the end of the phase.
	return nil, s.supervise(start.Add(phase))
}

// supervise waits until the deadline, restarting (as systemd or Kubernetes
// would) any member that ended by itself meanwhile. An end is expected only
// after the member's own injected fault, or with exit 4 or 5 (conflict,
// dependency unavailable) soon after a fault of etcd or the WAL server;
// any other is a problem of the run. A member killed by the schedule stays
// dead for its hold.
func (s *system) supervise(until time.Time) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(until) {
		for _, name := range s.order {
			if err := s.reviveIfEnded(name); err != nil {
				return err
			}
			if err := s.settleArmed(name); err != nil {
				return err
			}
		}
		if s.resumePending {
			s.resumeStops()
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

// depGrace is how long after a fault of etcd or the WAL server a member may
// give up with exit 4 or 5.
const depGrace = 30 * time.Second

// reviveIfEnded restarts a member that ended by itself, judging its end.
func (s *system) reviveIfEnded(name string) error {
	m := s.members[name]
	if m.killed || m.p == nil || !m.p.Exited() {
		return nil
	}
	r := m.p.Wait()
	if r.Code == 6 {
		return fmt.Errorf("%s exited 6 (data integrity): %s", name, r)
	}
	if !endExplained(r, m.failpoints != "", time.Since(s.lastDepFault)) {
		s.problems = append(s.problems, fmt.Sprintf("%s ended unexpectedly: %s", name, r))
	}
	s.notes = append(s.notes, fmt.Sprintf("%s ended by itself (exit %d) and was restarted", name, r.Code))
	if m.armed != "" && !injected(r.Stderr) {
		// It ended before its injected fault fired (etcd was away, say):
		// the fault stays planned on the next process.
		armed, until := m.armed, m.armedUntil
		err := s.restart(name, m.failpoints)
		m.armed, m.armedUntil = armed, until
		return err
	}
	// An injected fault fires once: the restarted process runs clean.
	return s.restart(name, "")
}

// endExplained reports whether a member's own end r is explained: by its
// injected fault (armed: it runs with failpoints), or as exit 4 or 5
// (conflict, dependency unavailable) within depGrace after a fault of etcd
// or the WAL server (sinceDep ago). A crash of the Go runtime never is.
func endExplained(r proc.Result, armed bool, sinceDep time.Duration) bool {
	if proc.Crash(r.Stderr) != "" {
		return false
	}
	return armed && injected(r.Stderr) || (r.Code == 4 || r.Code == 5) && sinceDep < depGrace
}

// apply injects a fault or ends it.
func (s *system) apply(ev event) error {
	f := ev.f
	if f.Target == "etcd" || f.Target == "wal" {
		s.lastDepFault = time.Now()
	}
	switch {
	case slices.Contains(oneShots, f.Kind):
		s.cleaned = s.cleaned || f.Kind == Clean || f.Kind == CleanKill
		s.oneShots = append(s.oneShots, s.startOneShot(f))
		return nil
	case f.Kind == KillExec || f.Kind == StopExec:
		s.execFaults[f] = startExecFault(f, s.masterGroups)
		return nil
	}
	m := s.members[f.Target]
	if !ev.recover {
		// A fault hits a live process: one that just ended by itself is
		// restarted first.
		if err := s.reviveIfEnded(f.Target); err != nil {
			return err
		}
	}
	switch f.Kind {
	case StopWorker, StopWAL, StopEtcd, StopMaster:
		if ev.recover {
			m.p.Cont()
		} else {
			m.p.Stop()
			s.faults.Fire(f.tally())
		}
		m.stopped = !ev.recover
		return nil
	case IOWorker, FsyncWorker, IOWAL:
		if ev.recover && m.armed != "" && !injected(m.p.Stderr()) {
			// Not fired yet (the worker may have held no table): it runs on
			// armed, and supervise restarts it clean once it fires.
			m.armedUntil = time.Now().Add(armWait)
			return nil
		}
		if ev.recover {
			return s.restart(f.Target, "")
		}
		err := s.restart(f.Target, f.Spec)
		m.armed = f.tally()
		return err
	}
	// Kills: the member stays dead for the hold, then starts again.
	if ev.recover {
		return s.restart(f.Target, "")
	}
	m.p.Kill()
	m.killed = true
	s.faults.Fire(f.tally())
	return nil
}

// armWait is how long an injected I/O fault that has not fired by the end
// of its hold is given still.
const armWait = 30 * time.Second

// settleArmed restarts clean a member whose injected fault outlived its
// hold once it fired, or once armWait is over (then it did not fire).
func (s *system) settleArmed(name string) error {
	m := s.members[name]
	if m.armedUntil.IsZero() || !injected(m.p.Stderr()) && time.Now().Before(m.armedUntil) {
		return nil
	}
	return s.restart(name, "")
}

// quiesce ends every fault: the recoveries still due are applied, stopped
// members continue, members that died on their own or run with failpoints
// start again clean, one-shots end. It returns what it had to repair
// beyond the schedule.
func (s *system) quiesce(due []event) ([]string, error) {
	for _, ev := range due {
		if ev.recover {
			if err := s.apply(ev); err != nil {
				return s.notes, fmt.Errorf("%s: %w", ev.f, err)
			}
		}
	}
	for f, e := range s.execFaults {
		if e.wait() {
			s.faults.Fire(f.tally())
		} else {
			s.execMissed++
		}
	}
	for slices.ContainsFunc(s.order, func(name string) bool { return !s.members[name].armedUntil.IsZero() }) {
		if err := s.supervise(time.Now().Add(250 * time.Millisecond)); err != nil {
			return s.notes, err
		}
	}
	for _, name := range s.order {
		m := s.members[name]
		if m.stopped {
			m.p.Cont()
			m.stopped = false
		}
		if err := s.reviveIfEnded(name); err != nil {
			return s.notes, err
		}
		if m.failpoints != "" {
			if err := s.restart(name, ""); err != nil {
				return s.notes, err
			}
		}
	}
	for deadline := time.Now().Add(oneShotWindow); s.resumePending && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		s.resumeStops()
	}
	if s.resumePending {
		return s.notes, fmt.Errorf("the storage stops could not be resumed within %s", oneShotWindow)
	}
	for _, o := range s.oneShots {
		if p := o.wait(); p != "" {
			s.problems = append(s.problems, p)
		}
		if o.fired {
			s.faults.Fire(o.f.tally())
		}
		g, r := o.merged()
		s.compactions, s.versionsRemoved, s.revokes = s.compactions+g, s.versionsRemoved+r, s.revokes+o.revokes
	}
	return s.notes, nil
}

// crashes lists every member process and catch-up executor whose stderr
// shows a crash of the Go runtime, killed on purpose or not.
func (s *system) crashes() []string {
	var out []string
	for _, name := range s.order {
		m := s.members[name]
		for _, log := range append(slices.Clone(m.logs), m.p.Stderr()) {
			if c := proc.Crash(log); c != "" {
				out = append(out, fmt.Sprintf("%s crashed: %s", name, c))
			}
		}
	}
	for _, path := range s.executorLogs() {
		if b, err := os.ReadFile(path); err == nil && proc.Crash(string(b)) != "" {
			out = append(out, fmt.Sprintf("executor %s crashed: %s", filepath.Base(path), proc.Crash(string(b))))
		}
	}
	return out
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
