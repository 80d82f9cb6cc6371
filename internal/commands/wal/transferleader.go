package wal

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// TransferLeaderOptions of `walctl wal transfer-leader`.
type TransferLeaderOptions struct {
	memberDeps
	Name, ID string
}

// NewCmdTransferLeader returns `wal transfer-leader`.
func NewCmdTransferLeader(f *cmdutil.Factory, runF func(context.Context, *TransferLeaderOptions) error) *cobra.Command {
	opts := &TransferLeaderOptions{memberDeps: newMemberDeps(f)}
	cmd := &cobra.Command{
		Use:   "transfer-leader --group G [--name N | --id ID]",
		Short: "Hand a WAL group's leadership to another voter",
		Long: `Ask the leader of group G to hand leadership to the voter named by --name or
--id, or to any caught-up voter when neither is given (before maintenance
of the leader's machine). Appends in flight during the transfer are
answered by the old leader or refused before proposal, and producers'
clients follow the new leader.` + membersExitStatus,
		Example: `  walctl wal transfer-leader --group g1
  walctl wal transfer-leader --group g1 --name b`,
		Args: cmdutil.ExactArgs(0, "wal transfer-leader takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			if opts.Name != "" && opts.ID != "" {
				return cmdutil.FlagErrorf("give at most one of --name and --id")
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return transferLeaderRun(cmd.Context(), opts)
		},
	}
	addGroupFlag(cmd, &opts.memberDeps)
	cmd.Flags().StringVar(&opts.Name, "name", "", "the voter to lead (default: any caught-up voter)")
	cmd.Flags().StringVar(&opts.ID, "id", "", "the voter's id")
	return cmd
}

func transferLeaderRun(ctx context.Context, opts *TransferLeaderOptions) error {
	id := opts.ID
	if opts.Name != "" {
		var err error
		if id, err = opts.resolveID(ctx, "", opts.Name); err != nil {
			return err
		}
	}
	a, err := opts.Admin(opts.Group)
	if err != nil {
		return err
	}
	if err := a.TransferLeader(ctx, id); err != nil {
		return err
	}
	return membersAfterChange(ctx, opts.memberDeps)
}
