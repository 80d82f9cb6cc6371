package catchup

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	coremaster "github.com/walctl/walctl/internal/core/master"
)

// CancelOptions of `walctl catchup cancel`.
type CancelOptions struct {
	deps
	Target string
	Reason string
}

// NewCmdCancel returns `walctl catchup cancel`.
func NewCmdCancel(f *cmdutil.Factory, runF func(context.Context, *CancelOptions) error) *cobra.Command {
	opts := &CancelOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "cancel TABLE [--reason R]",
		Short: "Cancel a table's catch-up: close its admission by CAS, then terminate the Job",
		Long: `Cancel TABLE's active catch-up. The master observes the table's progress and,
in one etcd transaction guarded by exactly that observation, closes commit
admission and persists the termination intent; progress recorded in between
defeats the cancellation (exit 4; run it again). The executor commits nothing
more once admission is closed; the master then terminates the Job (guarded by
its UID) and releases its slot when every process has ended. An operator's
cancellation does not count against the retry budget. A Job that already ended
by itself cannot be cancelled: its outcome stands (exit 4, "already finished").
Prints the status.
` + clientExitHelp,
		Example: `  walctl catchup cancel orders --reason "maintenance window"`,
		Args:    cmdutil.ExactArgs(1, "catchup cancel takes one table"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Target = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return cancelRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (recorded with the termination intent)")
	cmdutil.AddSettingFlags(cmd.Flags(), KeyMasterURL)
	return cmd
}

func cancelRun(ctx context.Context, opts *CancelOptions) error {
	c, err := opts.Master()
	if err != nil {
		return err
	}
	st, err := c.Cancel(ctx, coremaster.CancelRequest{Target: opts.Target, Reason: opts.Reason})
	if err != nil {
		return err
	}
	return printStatus(opts.Print, st)
}
