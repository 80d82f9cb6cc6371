package catchup

import (
	"context"
	"fmt"
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
