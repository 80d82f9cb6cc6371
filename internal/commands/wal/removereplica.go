package wal

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// RemoveReplicaOptions of `walctl wal remove-replica`.
type RemoveReplicaOptions struct {
	memberDeps
	Name, ID string
}

// NewCmdRemoveReplica returns `wal remove-replica`.
func NewCmdRemoveReplica(f *cmdutil.Factory, runF func(context.Context, *RemoveReplicaOptions) error) *cobra.Command {
	opts := &RemoveReplicaOptions{memberDeps: newMemberDeps(f)}
	cmd := &cobra.Command{
		Use:   "remove-replica --group G (--name N | --id ID)",
		Short: "Remove a replica from a WAL group",
		Long: `Remove a replica from group G through the leader, by name (when exactly one
replica has it) or by id (after a rebuild, the old and the new replica share
a name: remove the old one by the id 'wal members' shows). Removing a voter
shrinks the quorum: a 3-replica group with one removed tolerates no more
failures until a replica is added.` + membersExitStatus,
		Example: `  walctl wal remove-replica --group g1 --name c
  walctl wal remove-replica --group g1 --id c-3f9a2b`,
		Args: cmdutil.ExactArgs(0, "wal remove-replica takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			if (opts.Name == "") == (opts.ID == "") {
				return cmdutil.FlagErrorf("give exactly one of --name and --id")
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return removeReplicaRun(cmd.Context(), opts)
		},
	}
	addGroupFlag(cmd, &opts.memberDeps)
	cmd.Flags().StringVar(&opts.Name, "name", "", "the replica's name")
	cmd.Flags().StringVar(&opts.ID, "id", "", "the replica's id")
	return cmd
}

func removeReplicaRun(ctx context.Context, opts *RemoveReplicaOptions) error {
	id, err := opts.resolveID(ctx, opts.ID, opts.Name)
	if err != nil {
		return err
	}
	a, err := opts.Admin(opts.Group)
	if err != nil {
		return err
	}
	if err := a.RemoveReplica(ctx, id); err != nil {
		return err
	}
	return membersAfterChange(ctx, opts.memberDeps)
}
