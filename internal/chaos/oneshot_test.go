package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/walctl/walctl/internal/testutil/proc"
)

// oneShotWindow bounds how long a one-shot is tried again: racing the
// workers it is often refused (the table is claimed: exit 4) or meets a
// stopped dependency (exit 5). After revokeAfter of refusals it revokes the
// holder's claim before each try, as an operator would (`claim revoke`: the
// holder is fenced out and leaves the table alone for a while).
const (
	oneShotWindow = 45 * time.Second
	revokeAfter   = 5 * time.Second
)

// oneShot is a scheduled one-shot command (publish, compact, clean), run
// again until it reaches its goal — exit 0, or SIGKILLed by its failpoint
// for the *-kill kinds — or its window passes: a planned fault that never
// ran tested nothing.
type oneShot struct {
	f       fault
	fired   bool
	revokes int // claims it revoked to get its turn
	results []proc.Result
	problem string // an unexpected end: a crash, exit 6, or a code no retry explains
	done    chan struct{}
}

// startOneShot runs f's command in the background until it fires.
func (s *system) startOneShot(f fault) *oneShot {
	o := &oneShot{f: f, done: make(chan struct{})}
	var env []string
	if f.Spec != "" {
		env = []string{"WALCTL_FAILPOINTS=" + f.Spec}
	}
	args := append([]string{"--data-dir", s.procDir(f.Kind), "--output", "json"}, oneShotArgs(f)...)
	go func() {
		defer close(o.done)
		start := time.Now()
		for {
			r := s.walctl.Start(s.t, f.Kind+"-"+f.Target, env, args...).Wait()
			o.results = append(o.results, r)
			if o.fired = o.goal(r); o.fired {
				return
			}
			// Refused (claimed, fenced), a dependency away, no dataset yet
			// (nothing published), or nothing done (nothing to merge, or no
			// failpoint reached before the end): try again.
			// A table a worker's failed fsync stopped is refused with
			// exit 6 until the operator resumes it.
			stopped := r.Code == 6 && strings.Contains(r.Stderr, "table stopped by a storage failure")
			again := r.Code == 3 || r.Code == 4 || r.Code == 5 || stopped || (r.Code == 0 && (f.Spec != "" || f.Kind == Compact))
			if proc.Crash(r.Stderr) != "" || r.Signal != 0 || !again {
				o.problem = fmt.Sprintf("%s (%s): %s", f.Kind, strings.Join(args, " "), r)
				return
			}
			if time.Since(start) > oneShotWindow || s.ctx.Err() != nil {
				return
			}
			if r.Code == 4 && strings.Contains(r.Stderr, "claimed by another holder") && time.Since(start) > revokeAfter {
				o.revoke(s)
				continue
			}
			wait := 100 * time.Millisecond
			if r.Code == 0 {
				wait = time.Second // let the workers publish more first
			}
			time.Sleep(wait)
		}
	}()
	return o
}

// revoke revokes the claim on the one-shot's table (whoever holds it now).
func (o *oneShot) revoke(s *system) {
	r := s.walctl.Start(s.t, "revoke-"+o.f.Target, nil, "--data-dir", s.procDir("revoke"), "--output", "json",
		"claim", "revoke", "--table", o.f.Target, "--reason", "chaos: make room for "+o.f.Kind).Wait()
	o.results = append(o.results, r)
	if r.Code == 0 {
		o.revokes++
	}
}

func oneShotArgs(f fault) []string {
	switch f.Kind {
	case Publish, PublishKill:
		return []string{"publish", "--table", f.Target}
	case Compact, CompactKill:
		return []string{"table", "compact", "--table", f.Target}
	}
	return []string{"table", "clean", "--table", f.Target, "--older-than", f.OlderThan.String()}
}

// merged counts what the one-shot's successful run did: compaction
// groups committed, versions a clean removed (from its JSON output).
func (o *oneShot) merged() (groups, removed int) {
	if !o.fired || o.f.Spec != "" {
		return 0, 0
	}
	var out struct {
		Groups          []json.RawMessage `json:"groups"`
		VersionsRemoved []uint64          `json:"versions_removed"`
	}
	_ = json.Unmarshal([]byte(o.results[len(o.results)-1].Stdout), &out)
	return len(out.Groups), len(out.VersionsRemoved)
}

// goal reports whether a run of the one-shot did what was planned: a
// compaction must have merged something (the workers keep adding small
// fragments, so a later try will).
func (o *oneShot) goal(r proc.Result) bool {
	if o.f.Spec != "" {
		return r.Signal == syscall.SIGKILL
	}
	if o.f.Kind == Compact {
		var out struct {
			Groups []json.RawMessage `json:"groups"`
		}
		if json.Unmarshal([]byte(r.Stdout), &out) != nil || len(out.Groups) == 0 {
			return false
		}
	}
	return r.Code == 0 && proc.Crash(r.Stderr) == ""
}

// wait waits for the one-shot to end and returns its problem, if any.
func (o *oneShot) wait() string {
	<-o.done
	for _, r := range o.results {
		if c := proc.Crash(r.Stderr); c != "" {
			return fmt.Sprintf("%s %s crashed: %s", o.f.Kind, o.f.Target, c)
		}
	}
	return o.problem
}
