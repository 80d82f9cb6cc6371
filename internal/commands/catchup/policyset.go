package catchup

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
)

// PolicySetOptions of `walctl catchup policy set`.
type PolicySetOptions struct {
	deps
	ErrOut io.Writer
	Actor  string
	// Apply changes the policy read from etcd as the flags given ask.
	Apply          func(*corecatchup.Policy)
	ExpectRevision int64
	Reason         string
}

// NewCmdPolicySet returns `catchup policy set`.
func NewCmdPolicySet(f *cmdutil.Factory, runF func(context.Context, *PolicySetOptions) error) *cobra.Command {
	opts := &PolicySetOptions{deps: newDeps(f), ErrOut: f.IOStreams.ErrOut, Actor: actor()}
	var fl policyFlags
	cmd := &cobra.Command{
		Use:   "set [--owned-targets T,…|--add-owned-target T|--remove-owned-target T] [--enabled] [--max-jobs N] …",
		Short: "Change the stored catch-up policy (CAS on its revision, audited)",
		Long: `Change the catch-up policy stored in etcd: the flags given change the stored
policy's fields (the others keep their stored values); the result is validated
exactly as a master's configuration is, and written in one etcd transaction
guarded by the revision it was read at (or --expect-revision), together with an
audit record (action set-catchup-policy, the fields changed, before and after).

Running masters keep the policy they started with and refuse admissions until
they are restarted; restart every master with the new policy in its
configuration (catchup.* settings), or it refuses to start.

JSON (--output json): {"before": {"policy", "revision"}, "after": {"policy",
"revision"}, "fields": [changed JSON field names], "audit_key"}.
` + policyExitHelp,
		Example: `  walctl catchup policy show
  walctl catchup policy set --add-owned-target invoices --reason "invoices backlog" --expect-revision 1234
  walctl catchup policy set --enabled=false --reason "incident 4711"`,
		Args: cmdutil.ExactArgs(0, "catchup policy set takes no arguments (use flags)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			apply, err := fl.apply(cmd.Flags())
			if err != nil {
				return err
			}
			opts.Apply = apply
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return policySetRun(cmd.Context(), opts)
		},
	}
	fl.register(cmd.Flags())
	cmd.Flags().Int64Var(&opts.ExpectRevision, "expect-revision", 0, "change the policy only if it is still at this revision (from 'policy show')")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (kept in the audit record)")
	return cmd
}

func policySetRun(ctx context.Context, opts *PolicySetOptions) error {
	s, err := opts.Policies(ctx)
	if err != nil {
		return err
	}
	cur, err := s.LoadPolicy(ctx)
	if err != nil {
		return err
	}
	p := cur.Policy
	p.OwnedTargets = slices.Clone(p.OwnedTargets)
	opts.Apply(&p)
	expect := opts.ExpectRevision
	if expect == 0 {
		expect = cur.Revision // the change is based on what was read here
	}
	res, err := s.SetPolicy(ctx, corecatchup.PolicyChange{Policy: p, ExpectRevision: expect, Actor: opts.Actor, Reason: opts.Reason})
	if err != nil {
		return err
	}
	if err := opts.Print(res, func() *render.Table { return policyTable(res.After) }); err != nil {
		return err
	}
	if len(res.Fields) == 0 {
		fmt.Fprintf(opts.ErrOut, "the stored policy already is as asked (revision %d): nothing written\n", res.After.Revision)
		return nil
	}
	fmt.Fprintf(opts.ErrOut, "catch-up policy changed in %s (revision %d → %d, audit %s); restart every master with this policy in its configuration\n",
		strings.Join(res.Fields, ", "), res.Before.Revision, res.After.Revision, res.AuditKey)
	return nil
}

func actor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
