package catchup

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
)

// StatusOptions of `walctl catchup status`.
type StatusOptions struct {
	deps
	Target string
}

// NewCmdStatus returns `walctl catchup status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "status TABLE",
		Short: "Show a table's catch-up: Job identity, slot, progress, stall observation, outcome",
		Long: `Show TABLE's catch-up as the master sees it: phase, the Job's identity (name,
UID, resourceVersion), slot and attempt, the admission and progress record
(execution id, progress sequence, last progress and heartbeat), the master's
stall observation, termination intent, the retry budget (consecutive failures,
next retry, needs attention), the last outcome and the latest backlog
statistics.

JSON (--output json) is the API's status object; a field is null when unknown
or not applicable (see GET /api/v1/catchup in 'walctl master run --help').
` + clientExitHelp,
		Example: "  walctl catchup status orders\n  walctl catchup status orders --output json | jq .progress.seq",
		Args:    cmdutil.ExactArgs(1, "catchup status takes one table"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Target = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddSettingFlags(cmd.Flags(), KeyMasterURL)
	return cmd
}

func statusRun(ctx context.Context, opts *StatusOptions) error {
	c, err := opts.Master()
	if err != nil {
		return err
	}
	st, err := c.Status(ctx, opts.Target)
	if err != nil {
		return err
	}
	return printStatus(opts.Print, st)
}

// printStatus renders a status as field/value rows, or as the API's JSON.
func printStatus(print func(any, func() *render.Table) error, st corecatchup.Status) error {
	return print(st, func() *render.Table {
		t := render.NewTable("field", "value")
		t.Add("target", st.Target)
		t.Add("phase", string(st.Phase))
		t.Add("active", fmt.Sprint(st.Active))
		t.Add("awaiting handover", fmt.Sprint(st.AwaitingHandover))
		t.Add("job", str(st.JobID))
		t.Add("job uid", str(st.JobUID))
		t.Add("slot", str(st.Slot))
		t.Add("attempt", str(st.Attempt))
		if p := st.Progress; p != nil {
			t.Add("admission open", fmt.Sprint(p.AdmissionOpen))
			t.Add("execution", fmt.Sprint(p.ExecID))
			t.Add("progress seq", fmt.Sprint(p.Seq))
			t.Add("last progress", when(p.LastProgressAt))
			t.Add("heartbeat", when(p.HeartbeatAt))
		}
		if o := st.Observation; o != nil {
			t.Add("observation", fmt.Sprintf("%s %s", o.Verdict, o.Detail))
		}
		t.Add("termination requested", fmt.Sprint(st.TerminationRequested))
		t.Add("consecutive failures", fmt.Sprint(st.ConsecutiveFailures))
		t.Add("next retry", when(st.NextRetry))
		t.Add("needs attention", fmt.Sprint(st.NeedsAttention))
		t.Add("outcome", str(st.Outcome))
		t.Add("outcome detail", str(st.OutcomeDetail))
		t.Add("finished", when(st.FinishedAt))
		if s := st.Stats; s != nil {
			t.Add("pending generations", fmt.Sprint(s.PendingGenerations))
			t.Add("stats observed", when(&s.ObservedAt))
		}
		return t
	})
}

func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
