package catchup

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
	coremaster "github.com/walctl/walctl/internal/core/master"
)

// SubmitOptions of `walctl catchup submit`.
type SubmitOptions struct {
	deps
	Target string
	Reason string
	DryRun bool
}

// NewCmdSubmit returns `walctl catchup submit`.
func NewCmdSubmit(f *cmdutil.Factory, runF func(context.Context, *SubmitOptions) error) *cobra.Command {
	opts := &SubmitOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "submit TABLE [--dry-run] [--reason R]",
		Short: "Ask the master to admit a catch-up Job for a table (dry-run first)",
		Long: `Ask the master to catch up TABLE. The master applies the same admission as its
backlog scan: the table must be an owned target with fresh statistics over the
threshold, within fleet capacity and retry backoff. The answer is a decision:
disabled, not_owned, no_stats, stale_stats, below_threshold, already_active,
cooling_down, capacity_exhausted, awaiting_handover, eligible (dry run) or
reserved, with the Job identity when a Job is concerned. With --dry-run nothing
is reserved, and every decision is an answer (exit 0).

JSON (--output json): {"target", "decision", "message", "dry_run", "job_id",
"attempt", "slot"}; job_id, attempt and slot are null when no Job is concerned.
` + clientExitHelp,
		Example: `  walctl catchup submit orders --dry-run
  walctl catchup submit orders --reason "backlog after the outage" --output json`,
		Args: cmdutil.ExactArgs(1, "catchup submit takes one table"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Target = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return submitRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "decide without reserving anything")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (recorded with the reservation and logged)")
	cmdutil.AddSettingFlags(cmd.Flags(), KeyMasterURL)
	return cmd
}

func submitRun(ctx context.Context, opts *SubmitOptions) error {
	c, err := opts.Master()
	if err != nil {
		return err
	}
	a, err := c.Submit(ctx, coremaster.SubmitRequest{Target: opts.Target, Reason: opts.Reason, DryRun: opts.DryRun})
	if err != nil {
		return err
	}
	if err := opts.Print(a, func() *render.Table {
		t := render.NewTable("target", "decision", "job", "attempt", "slot", "message")
		t.Add(a.Target, string(a.Decision), str(a.JobID), str(a.Attempt), str(a.Slot), a.Message)
		return t
	}); err != nil {
		return err
	}
	switch {
	case opts.DryRun, a.Decision.Admitted(), a.Decision == corecatchup.DecisionAlreadyActive:
		return nil
	}
	return &cmdutil.ExitError{Code: cmdutil.ExitAdmissionRefused,
		Err: fmt.Errorf("catch-up of %s refused: %s: %s", a.Target, a.Decision, a.Message)}
}

// str renders an optional value, "-" when null.
func str[T any](v *T) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
