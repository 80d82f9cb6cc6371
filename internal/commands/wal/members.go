package wal

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/walflight"
)

// groupAdmin is what the membership verbs need of a WAL group: its client
// follows the leader within --command-timeout.
type groupAdmin interface {
	Members(ctx context.Context) ([]walflight.Member, error)
	AddReplica(ctx context.Context, id, peerAddr string) error
	RemoveReplica(ctx context.Context, id string) error
	TransferLeader(ctx context.Context, id string) error
}

// memberDeps are the membership verbs' dependencies.
type memberDeps struct {
	deps
	// Admin returns the client of a configured group (unknown: exit 2).
	Admin func(group string) (groupAdmin, error)
	Group string
}

func newMemberDeps(f *cmdutil.Factory) memberDeps {
	return memberDeps{deps: newDeps(f), Admin: func(g string) (groupAdmin, error) { return f.WALGroup(g) }}
}

func addGroupFlag(cmd *cobra.Command, d *memberDeps) {
	cmd.Flags().StringVar(&d.Group, "group", "", "WAL group (one of --wal-groups)")
}

func (d *memberDeps) check() error {
	if d.Group == "" {
		return cmdutil.FlagErrorf("--group is required")
	}
	return nil
}

const membersExitStatus = `

EXIT STATUS
  0 done, 2 unknown group or bad flags, 3 no such replica, 5 no member of
  the group answered within --command-timeout (the members tried are named)
  or the outcome of a change is unknown (run 'wal members' to see it).`

// MembersOptions of `walctl wal members`.
type MembersOptions struct{ memberDeps }

// NewCmdMembers returns `wal members`.
func NewCmdMembers(f *cmdutil.Factory, runF func(context.Context, *MembersOptions) error) *cobra.Command {
	opts := &MembersOptions{newMemberDeps(f)}
	cmd := &cobra.Command{
		Use:   "members --group G",
		Short: "List a WAL group's replicas: id, name, peer address, voter, leader, applied index, lag",
		Long: `List the replicas of a replicated WAL group as its leader sees them: the
replica id (name plus the suffix chosen on its first start), peer address,
voter or non-voter (a rebuilt replica stays a non-voter until caught up),
which one leads, each one's applied raft index and its lag behind the
leader. A replica whose status could not be fetched shows why.` + membersExitStatus,
		Example: `  walctl wal members --group g1
  walctl wal members --group g1 --output json | jq -r '.[] | select(.leader) | .name'`,
		Args: cmdutil.ExactArgs(0, "wal members takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			opts.fill(f)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return membersRun(cmd.Context(), opts)
		},
	}
	addGroupFlag(cmd, &opts.memberDeps)
	return cmd
}

func membersRun(ctx context.Context, opts *MembersOptions) error {
	ms, err := opts.members(ctx)
	if err != nil {
		return err
	}
	return opts.Print(ms, func() *render.Table { return memberTable(ms) })
}

func (d *memberDeps) members(ctx context.Context) ([]walflight.Member, error) {
	a, err := d.Admin(d.Group)
	if err != nil {
		return nil, err
	}
	ms, err := a.Members(ctx)
	if ms == nil {
		ms = []walflight.Member{}
	}
	return ms, err
}

func memberTable(ms []walflight.Member) *render.Table {
	t := render.NewTable("id", "name", "peer address", "role", "leader", "applied", "lag", "error")
	for _, m := range ms {
		role, leader := "non-voter", ""
		if m.Voter {
			role = "voter"
		}
		if m.Leader {
			leader = "leader"
		}
		t.Add(m.ID, m.Name, m.PeerAddr, role, leader, fmt.Sprint(m.AppliedIndex), fmt.Sprint(m.Lag), m.Error)
	}
	return t
}

// resolveID finds the replica id of a name (or checks an id) in the group.
func (d *memberDeps) resolveID(ctx context.Context, id, name string) (string, error) {
	if id != "" {
		return id, nil
	}
	ms, err := d.members(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, m := range ms {
		if m.Name == name {
			ids = append(ids, m.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("WAL group %s has no replica named %q: %w", d.Group, name, errs.ErrNotFound)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("WAL group %s has several replicas named %q (%v): name one with --id: %w", d.Group, name, ids, errs.ErrInvalid)
}
