package catchupe2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// An operator cancels a running catch-up through the API while its
// executor is held just before its first data commit (a failpoint in the
// real child process): admission closes by CAS, the local runner
// terminates the process, nothing of the executor is committed, the slot
// is released without counting a failure, and an ordinary publish adopts
// the pinned plan and its prepared files — every ACKed record exactly once.
func TestCancelMidRunThenTakeover(t *testing.T) {
	fpDir := t.TempDir()
	f := setup(t, []string{failpoint.EnvSpec + "=" + failpoint.AfterWALEpochCheck + "=pause*1", failpoint.EnvDir + "=" + fpDir})
	n := f.n
	for i := 0; i < 40; i++ {
		if err := f.prod.Append(n.ctx, i%2, 1000); err != nil {
			t.Fatal(err)
		}
	}
	f.sealAll()
	n.run("backlog", "scan", "--output", "json")
	var a catchup.Admission
	if code := n.api(f.base, http.MethodPost, "/api/v1/catchup", map[string]any{"target": "big"}, &a); code != http.StatusOK ||
		a.Decision != catchup.DecisionReserved {
		t.Fatalf("submit: HTTP %d %+v", code, a)
	}
	// The executor has prepared and recorded its first batch and waits
	// before committing it.
	f.master.WaitFile(filepath.Join(fpDir, failpoint.AfterWALEpochCheck+".paused"))
	var st catchup.Status
	if code := n.api(f.base, http.MethodGet, "/api/v1/catchup?target=big", nil, &st); code != http.StatusOK ||
		st.Progress == nil || st.Progress.Seq != 1 || !st.Progress.AdmissionOpen {
		t.Fatalf("status while paused: HTTP %d %+v", code, st.Progress)
	}

	if code := n.api(f.base, http.MethodPost, "/api/v1/catchup/cancel", map[string]any{"target": "big", "reason": "e2e"}, &st); code != http.StatusOK ||
		!st.TerminationRequested || st.Progress == nil || st.Progress.AdmissionOpen {
		t.Fatalf("cancel: HTTP %d %+v", code, st)
	}
	st, _ = waitFinished(t, n, f.base, "big")
	if st.Outcome == nil || *st.Outcome != catchup.OutcomeCancelled || st.ConsecutiveFailures != 0 || st.NextRetry != nil {
		t.Fatalf("after cancel: outcome %v, %d failures, next retry %v; want cancelled without a failure", st.Outcome, st.ConsecutiveFailures, st.NextRetry)
	}
	if ids := n.publishedIDs("big"); len(ids) != 0 {
		t.Fatalf("the cancelled executor committed %d rows", len(ids))
	}
	// Terminated while held before the commit: interrupted, one batch, no
	// commit (had it reached the commit, the closed admission refuses it).
	if rep := jobReport(t, n, *a.JobID); rep.ProgressBatches != 1 || rep.ProgressCommits != 0 ||
		(rep.Outcome != executor.OutcomeInterrupted && rep.Outcome != executor.OutcomeAdmissionClosed) {
		t.Fatalf("executor report %+v: want interrupted or admission_closed after 1 batch, 0 commits", rep)
	}

	out := n.run("publish", "--table", "big", "--all", "--output", "json")
	if !strings.Contains(out, `"adopted": true`) || !strings.Contains(out, `"reused": true`) {
		t.Fatalf("publish after the cancellation did not adopt the pinned plan and its files:\n%s", out)
	}
	t.Logf("%d ACKed records, each published exactly once (official reader)", f.exactlyOnce())
}
