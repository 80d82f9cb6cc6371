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

const policyExitHelp = `
EXIT STATUS
  0    shown; or changed (or already as asked: nothing written)
  2    invalid value (named), or no change asked for
  3    no policy is stored yet (the first 'walctl master run' stores its own)
  4    set: the stored policy changed since it was read (or is not at
       --expect-revision); nothing was written: show it and try again
  5    etcd is unavailable (set: the change may or may not have landed; 'policy
       show' tells)
  6    the stored record is of a kind or version this binary does not know`

// NewCmdPolicy returns the `catchup policy` group.
func NewCmdPolicy(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy <command>",
		Short: "Show or change the catch-up policy stored in etcd",
		Long: `The catch-up policy (catchup.*) is stored in etcd by the first 'walctl master
run'; every later master must bring exactly the stored policy or refuses to
start. 'policy show' prints it with its revision; 'policy set' changes it.`,
	}
	cmd.AddCommand(NewCmdPolicyShow(f, nil), NewCmdPolicySet(f, nil))
	return cmd
}

// PolicyShowOptions of `walctl catchup policy show`.
type PolicyShowOptions struct{ deps }

// NewCmdPolicyShow returns `catchup policy show`.
func NewCmdPolicyShow(f *cmdutil.Factory, runF func(context.Context, *PolicyShowOptions) error) *cobra.Command {
	opts := &PolicyShowOptions{deps: newDeps(f)}
	return &cobra.Command{
		Use:   "show",
		Short: "Show the stored catch-up policy and its revision",
		Long: `Show the catch-up policy stored in etcd and the revision a 'policy set
--expect-revision' compares against.

JSON (--output json): {"policy": {…the stored record's fields; durations in
nanoseconds (…_ns)…}, "revision"}.
` + policyExitHelp,
		Example: "  walctl catchup policy show\n  walctl catchup policy show --output json | jq .policy.owned_targets",
		Args:    cmdutil.ExactArgs(0, "catchup policy show takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return policyShowRun(cmd.Context(), opts)
		},
	}
}

func policyShowRun(ctx context.Context, opts *PolicyShowOptions) error {
	s, err := opts.Policies(ctx)
	if err != nil {
		return err
	}
	sp, err := s.LoadPolicy(ctx)
	if err != nil {
		return err
	}
	return opts.Print(sp, func() *render.Table { return policyTable(sp) })
}

// policyTable renders a stored policy as field/value rows, in the order of
// its JSON fields.
func policyTable(sp corecatchup.StoredPolicy) *render.Table {
	p := sp.Policy
	t := render.NewTable("field", "value")
	for _, r := range [][2]string{
		{"revision", fmt.Sprint(sp.Revision)},
		{"enabled", fmt.Sprint(p.Enabled)},
		{"max_jobs", fmt.Sprint(p.MaxJobs)},
		{"threshold_generations", fmt.Sprint(p.ThresholdGenerations)},
		{"stats_max_age", p.StatsMaxAge.String()},
		{"observe_interval", p.ObserveInterval.String()},
		{"soft_slice", p.SoftSlice.String()},
		{"startup_window", p.StartupWindow.String()},
		{"idle", p.Idle.String()},
		{"confirmation", p.Confirmation.String()},
		{"batch_bytes", fmt.Sprint(p.BatchBytes)},
		{"batch_generations", fmt.Sprint(p.BatchGenerations)},
		{"merge_buffer_bytes", fmt.Sprint(p.MergeBufferBytes)},
		{"cache_bytes", fmt.Sprint(p.CacheBytes)},
		{"attention_after", fmt.Sprint(p.AttentionAfter)},
		{"backoff_min", p.BackoffMin.String()},
		{"backoff_max", p.BackoffMax.String()},
		{"owned_targets", strings.Join(p.OwnedTargets, ",")},
	} {
		t.Add(r[0], r[1])
	}
	return t
}

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
