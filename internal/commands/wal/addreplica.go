package wal

import (
	"context"
	"net"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/walflight"
)

// AddReplicaOptions of `walctl wal add-replica`.
type AddReplicaOptions struct {
	memberDeps
	Peer, ID string
}

// NewCmdAddReplica returns `wal add-replica`.
func NewCmdAddReplica(f *cmdutil.Factory, runF func(context.Context, *AddReplicaOptions) error) *cobra.Command {
	opts := &AddReplicaOptions{memberDeps: newMemberDeps(f)}
	cmd := &cobra.Command{
		Use:   "add-replica --group G --peer ADDR [--id ID]",
		Short: "Add a replica to a WAL group: it joins as a non-voter, catches up, then votes",
		Long: `Add the replica listening on peer address ADDR (a 'wal serve --group G'
started on an empty directory, without --bootstrap) to group G. The leader
adds it as a non-voter, streams it a snapshot of the sealed generations not
yet trimmed plus the log, and promotes it to voter only once it has applied
everything the leader had: a blank replica never votes. The replica's id is
asked from it unless --id is given (then it must match).

This is how a replica whose directory was lost is rebuilt: start it on an
empty directory, add it here, then remove its old id with remove-replica.
If the command runs out of --command-timeout while the replica catches up,
it stays a non-voter and keeps catching up; run add-replica again to
promote it. On success the group's members are printed.` + membersExitStatus,
		Example: `  walctl wal add-replica --group g1 --peer 10.0.0.4:7171
  walctl --command-timeout 10m wal add-replica --group g1 --peer 10.0.0.4:7171 --output json`,
		Args: cmdutil.ExactArgs(0, "wal add-replica takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			if _, _, err := net.SplitHostPort(opts.Peer); err != nil {
				return cmdutil.FlagErrorf("--peer %q: want host:port (the replica's --peer-listen): %v", opts.Peer, err)
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return addReplicaRun(cmd.Context(), opts)
		},
	}
	addGroupFlag(cmd, &opts.memberDeps)
	cmd.Flags().StringVar(&opts.Peer, "peer", "", "the new replica's peer address (its --peer-listen)")
	cmd.Flags().StringVar(&opts.ID, "id", "", "the replica id it must answer with (default: whatever it answers)")
	return cmd
}

func addReplicaRun(ctx context.Context, opts *AddReplicaOptions) error {
	a, err := opts.Admin(opts.Group)
	if err != nil {
		return err
	}
	if err := a.AddReplica(ctx, opts.ID, opts.Peer); err != nil {
		return err
	}
	return membersAfterChange(ctx, opts.memberDeps)
}

// membersAfterChange prints the group once a change is done.
func membersAfterChange(ctx context.Context, d memberDeps) error {
	ms, err := d.members(ctx)
	if err != nil {
		return err
	}
	return d.Print(ms, func() *render.Table { return memberTable(ms) })
}

var _ groupAdmin = (*walflight.GroupClient)(nil)
