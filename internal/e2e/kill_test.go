package e2e

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/walctl/walctl/internal/core/failpoint"
)

// Small plans and small files, so a publication takes several rounds and a
// plan several files: a kill leaves work on both sides of it.
var smallRounds = []string{ttlEnv, "WALCTL_PUBLICATION_MAX_GENERATIONS=2", "WALCTL_PUBLICATION_FILE_BYTES=4096"}

// SIGKILL `walctl publish --all` at each named point in turn; a restarted
// publisher (once the dead one's lease has expired) completes the work, and
// the table holds every ACKed record exactly once.
func TestKillAtEachPointThenRestartCompletes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// A fresh table is created at version 1, fenced at 2 and gets its first
	// data commit at 3.
	// reuse: whether the restart's first publication adopts the dead
	// publisher's pinned plan and reuses its recorded files.
	points := []struct {
		spec           string
		adopts, reuses bool
	}{
		{failpoint.AfterWALEpochCheck + "=kill", true, true},
		{failpoint.AfterEpochAdvance + "=kill", false, false},
		{at(failpoint.BeforeManifestLink, "kill", 2), false, false}, // the fence
		{at(failpoint.BeforeManifestLink, "kill", 3), true, true},   // the first data commit
		{at(failpoint.AfterLinkBeforeDirSync, "kill", 2), false, false},
		{at(failpoint.AfterLinkBeforeDirSync, "kill", 3), false, false}, // published: retired, next plan
		{failpoint.AfterCommitBeforeTrim + "=kill", false, false},
		{failpoint.AfterFilesPrepared + "=kill@1", true, false}, // a partial set is never recorded
		{failpoint.AfterDescriptorRecord + "=kill", true, true},
	}
	for i, pt := range points {
		spec := pt.spec
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			c := c.forT(t)
			table := fmt.Sprintf("k%d", i)
			c.createTable(table)
			p := c.producer(table, uint64(10+i))
			p.generation(3, 40)
			p.generation(3, 40)

			r := c.run("killed", append(fp(spec), smallRounds...), "publish", "--table", table, "--all")
			if r.Signal != syscall.SIGKILL {
				t.Fatalf("publish with %s should die by SIGKILL: %s", spec, r)
			}
			// The dead publisher cannot release its claim: its successor
			// waits for the lease to expire.
			c.waitClaimGone(table)
			r = c.run("restarted", smallRounds, "publish", "--table", table, "--all")
			expect(t, "restarted publish --all", r, exitOK)
			s := parseSummary(t, r)
			if last := s.Rounds[len(s.Rounds)-1]; last.Outcome != "idle" {
				t.Fatalf("restarted publisher stopped before idle: %s", r.Stdout)
			}
			pub := s.published()
			if len(pub) == 0 || len(pub[0].Files) < 2 || pub[0].Adopted != pt.adopts || pub[0].Reused != pt.reuses {
				t.Fatalf("restart's first publication: want adopted=%v reused=%v and several files: %s", pt.adopts, pt.reuses, r.Stdout)
			}
			for _, round := range pub {
				if commits := c.dataCommitsOf(table, round.Plan); len(commits) != 1 {
					t.Fatalf("plan %s committed in versions %v", round.Plan, commits)
				}
			}
			n := p.exactlyOnce()
			c.trimmedToWatermarks(table)
			t.Logf("%s: restart published %d round(s); %d rows exactly once", spec, len(pub), n)
		})
	}
}
