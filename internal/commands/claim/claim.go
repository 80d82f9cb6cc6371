// Package claim implements `walctl claim`.
package claim

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
)

// NewCmdClaim returns the `claim` command group.
func NewCmdClaim(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claim <command>",
		Short: "Inspect and revoke table claims (who owns what)",
	}
	cmd.AddCommand(NewCmdInspect(f, nil), NewCmdRevoke(f, nil))
	return cmd
}

// InspectOptions of `walctl claim inspect`.
type InspectOptions struct {
	F     *cmdutil.Factory
	Table string
}

// NewCmdInspect returns `claim inspect`.
func NewCmdInspect(f *cmdutil.Factory, runF func(context.Context, *InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{F: f}
	return &cobra.Command{
		Use:   "inspect [TABLE]",
		Short: "Show who holds each table's claim, its lease TTL left, epoch and age",
		Long: `Show the claim of one table (or of every claimed table), read linearizably
from etcd: the owner, the lease and the TTL etcd has left on it, the publisher
epoch recorded under the claim, when it was taken and its CreateRevision (the
claim's identity, used by 'claim revoke --expect-revision').`,
		Example: "  walctl claim inspect\n  walctl claim inspect orders --output json",
		Args:    cmdutil.MaxArgs(1, "claim inspect takes at most one table"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Table = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return inspectRun(cmd.Context(), opts)
		},
	}
}

func inspectRun(ctx context.Context, opts *InspectOptions) error {
	co, err := opts.F.Coord(ctx)
	if err != nil {
		return err
	}
	var claims []coord.ClaimInfo
	if opts.Table != "" {
		c, err := co.Get(ctx, opts.Table)
		if err != nil {
			return err
		}
		claims = append(claims, c)
	} else if claims, err = co.List(ctx); err != nil {
		return err
	}
	if claims == nil {
		claims = []coord.ClaimInfo{}
	}
	now := opts.F.Now()
	return opts.F.Print(claims, func() *render.Table {
		t := render.NewTable("table", "owner", "kind", "epoch", "ttl left", "held for", "revision")
		for _, c := range claims {
			ttl := "expiring"
			if c.TTLLeft >= 0 {
				ttl = c.TTLLeft.Round(time.Second).String()
			}
			t.Add(c.Table, c.Owner.ID, c.Owner.Kind, fmt.Sprint(c.Epoch), ttl, now.Sub(c.HeldSince).Round(time.Second).String(), fmt.Sprint(c.CreateRevision))
		}
		return t
	})
}

// RevokeOptions of `walctl claim revoke`.
type RevokeOptions struct {
	F              *cmdutil.Factory
	Table          string
	ExpectRevision int64
	Reason         string
}

// NewCmdRevoke returns `claim revoke`.
func NewCmdRevoke(f *cmdutil.Factory, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{F: f}
	cmd := &cobra.Command{
		Use:   "revoke TABLE [--expect-revision REV] [--reason TEXT]",
		Short: "Revoke a table's claim (fenced, audited)",
		Long: `Revoke a table's claim: delete it in an etcd transaction guarded by its
CreateRevision, write an audit record in the same transaction, and revoke its
lease. The publisher epoch is not touched. What happens next: the holder sees
the revocation and stops publishing; the next claimant advances the epoch and
fences the table, so anything the old holder still tries to commit is refused.

With --expect-revision, the claim is revoked only if it is still the one
inspected (otherwise exit 4 and nothing changes).`,
		Example: `  walctl claim inspect orders
  walctl claim revoke orders --expect-revision 1234 --reason "stuck worker on node-7"`,
		Args: cmdutil.ExactArgs(1, "claim revoke needs the table name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Table = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return revokeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().Int64Var(&opts.ExpectRevision, "expect-revision", 0, "revoke only the claim with this CreateRevision")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (kept in the audit record)")
	return cmd
}

func revokeRun(ctx context.Context, opts *RevokeOptions) error {
	co, err := opts.F.Coord(ctx)
	if err != nil {
		return err
	}
	res, err := co.Revoke(ctx, coord.RevokeRequest{Table: opts.Table, ExpectCreateRevision: opts.ExpectRevision, Reason: opts.Reason, Actor: actor()})
	if err != nil && res.AuditKey == "" {
		return err
	}
	if perr := opts.F.Print(res, func() *render.Table {
		t := render.NewTable("table", "owner", "epoch", "revision", "audit")
		t.Add(res.Claim.Table, res.Claim.Owner.ID, fmt.Sprint(res.Claim.Epoch), fmt.Sprint(res.Claim.CreateRevision), res.AuditKey)
		return t
	}); perr != nil {
		return perr
	}
	fmt.Fprintf(opts.F.IOStreams.ErrOut, "revoked the claim of %s held by %s: the holder stops publishing; the next claimant advances the epoch past %d and fences the table\n",
		res.Claim.Table, res.Claim.Owner.ID, res.Claim.Epoch)
	return err
}

func actor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s (walctl claim revoke, pid %d)", name, host, os.Getpid())
}
