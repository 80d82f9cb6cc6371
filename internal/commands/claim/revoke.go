package claim

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
)

// RevokeOptions of `walctl claim revoke`.
type RevokeOptions struct {
	deps
	ErrOut         io.Writer
	Actor          string
	Table          string
	ExpectRevision int64
	Reason         string
}

// NewCmdRevoke returns `claim revoke`.
func NewCmdRevoke(f *cmdutil.Factory, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{deps: newDeps(f), ErrOut: f.IOStreams.ErrOut, Actor: cmdutil.Actor("claim revoke")}
	cmd := &cobra.Command{
		Use:   "revoke --table T [--expect-revision REV] [--reason TEXT]",
		Short: "Revoke a table's claim (fenced, audited)",
		Long: `Revoke a table's claim: delete it in an etcd transaction guarded by its
CreateRevision, write an audit record in the same transaction, and revoke its
lease. The publisher epoch is not touched. What happens next: the holder sees
the revocation and stops publishing; the next claimant advances the epoch and
fences the table, so anything the old holder still tries to commit is refused.

With --expect-revision, the claim is revoked only if it is still the one
inspected (otherwise exit 4 and nothing changes). 'walctl claim history'
lists the audit records.`,
		Example: `  walctl claim inspect --table orders
  walctl claim revoke --table orders --expect-revision 1234 --reason "stuck worker on node-7"`,
		Args: cmdutil.TableArgs("claim revoke", &opts.Table, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return revokeRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Table, "table whose claim to revoke")
	cmd.Flags().Int64Var(&opts.ExpectRevision, "expect-revision", 0, "revoke only the claim with this CreateRevision")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (kept in the audit record)")
	return cmd
}

func revokeRun(ctx context.Context, opts *RevokeOptions) error {
	co, err := opts.Coord(ctx)
	if err != nil {
		return err
	}
	res, err := co.Revoke(ctx, coord.RevokeRequest{Table: opts.Table, ExpectCreateRevision: opts.ExpectRevision, Reason: opts.Reason, Actor: opts.Actor})
	if err != nil && res.AuditKey == "" {
		return err
	}
	if perr := opts.Print(res, func() *render.Table {
		t := render.NewTable("table", "owner", "epoch", "revision", "audit")
		t.Add(res.Claim.Table, res.Claim.Owner.ID, fmt.Sprint(res.Claim.Epoch), fmt.Sprint(res.Claim.CreateRevision), res.AuditKey)
		return t
	}); perr != nil {
		return perr
	}
	fmt.Fprintf(opts.ErrOut, "revoked the claim of %s held by %s: the holder stops publishing; the next claimant advances the epoch past %d and fences the table\n",
		res.Claim.Table, res.Claim.Owner.ID, res.Claim.Epoch)
	return err
}
