package catchup

import (
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
)

// policyField is one flag of `catchup policy set`: bind registers it on
// the flag values' policy, copy takes its value into the stored one.
type policyField struct {
	name string
	bind func(fs *pflag.FlagSet, v *corecatchup.Policy, name, usage string)
	copy func(dst, src *corecatchup.Policy)
}

func intField(name string, f func(*corecatchup.Policy) *int) policyField {
	return policyField{name, func(fs *pflag.FlagSet, v *corecatchup.Policy, n, u string) { fs.IntVar(f(v), n, 0, u) },
		func(d, s *corecatchup.Policy) { *f(d) = *f(s) }}
}

func durationField(name string, f func(*corecatchup.Policy) *time.Duration) policyField {
	return policyField{name, func(fs *pflag.FlagSet, v *corecatchup.Policy, n, u string) { fs.DurationVar(f(v), n, 0, u) },
		func(d, s *corecatchup.Policy) { *f(d) = *f(s) }}
}

func sizeField(name string, f func(*corecatchup.Policy) *int64) policyField {
	return policyField{name, func(fs *pflag.FlagSet, v *corecatchup.Policy, n, u string) {
		fs.Var(&cmdutil.ByteSize{V: f(v)}, n, u+" (e.g. 64MiB)")
	}, func(d, s *corecatchup.Policy) { *f(d) = *f(s) }}
}

// policyFields are the policy's settings as flags, in the order of the
// policy's fields; the owned targets come last so that additions and
// removals apply to a replaced list.
var policyFields = []policyField{
	{"enabled", func(fs *pflag.FlagSet, v *corecatchup.Policy, n, u string) { fs.BoolVar(&v.Enabled, n, false, u) },
		func(d, s *corecatchup.Policy) { d.Enabled = s.Enabled }},
	intField("max-jobs", func(p *corecatchup.Policy) *int { return &p.MaxJobs }),
	intField("threshold-generations", func(p *corecatchup.Policy) *int { return &p.ThresholdGenerations }),
	durationField("stats-max-age", func(p *corecatchup.Policy) *time.Duration { return &p.StatsMaxAge }),
	durationField("observe-interval", func(p *corecatchup.Policy) *time.Duration { return &p.ObserveInterval }),
	durationField("soft-slice", func(p *corecatchup.Policy) *time.Duration { return &p.SoftSlice }),
	durationField("startup-window", func(p *corecatchup.Policy) *time.Duration { return &p.StartupWindow }),
	durationField("idle", func(p *corecatchup.Policy) *time.Duration { return &p.Idle }),
	durationField("confirmation", func(p *corecatchup.Policy) *time.Duration { return &p.Confirmation }),
	sizeField("batch-bytes", func(p *corecatchup.Policy) *int64 { return &p.BatchBytes }),
	intField("batch-generations", func(p *corecatchup.Policy) *int { return &p.BatchGenerations }),
	sizeField("merge-buffer-bytes", func(p *corecatchup.Policy) *int64 { return &p.MergeBufferBytes }),
	sizeField("cache-bytes", func(p *corecatchup.Policy) *int64 { return &p.CacheBytes }),
	intField("attention-after", func(p *corecatchup.Policy) *int { return &p.AttentionAfter }),
	durationField("backoff-min", func(p *corecatchup.Policy) *time.Duration { return &p.BackoffMin }),
	durationField("backoff-max", func(p *corecatchup.Policy) *time.Duration { return &p.BackoffMax }),
	{"owned-targets", func(fs *pflag.FlagSet, v *corecatchup.Policy, n, u string) {
		fs.StringSliceVar(&v.OwnedTargets, n, nil, "replace the owned targets (comma separated; empty: none)")
	}, func(d, s *corecatchup.Policy) { d.OwnedTargets = slices.Clone(s.OwnedTargets) }},
}

// policyFlags are the flags of `catchup policy set`.
type policyFlags struct {
	v           corecatchup.Policy
	add, remove []string
}

func (fl *policyFlags) register(fs *pflag.FlagSet) {
	for _, f := range policyFields {
		f.bind(fs, &fl.v, f.name, "set catchup."+strings.ReplaceAll(f.name, "-", "_"))
	}
	fs.StringSliceVar(&fl.add, "add-owned-target", nil, "add owned targets (repeatable)")
	fs.StringSliceVar(&fl.remove, "remove-owned-target", nil, "remove owned targets (repeatable)")
}

// apply returns the change the given flags ask for; none is a usage error.
func (fl *policyFlags) apply(fs *pflag.FlagSet) (func(*corecatchup.Policy), error) {
	var changed []policyField
	for _, f := range policyFields {
		if fs.Changed(f.name) {
			changed = append(changed, f)
		}
	}
	add, remove := fs.Changed("add-owned-target"), fs.Changed("remove-owned-target")
	if len(changed) == 0 && !add && !remove {
		return nil, cmdutil.FlagErrorf("catchup policy set: no change asked for (give at least one policy flag)")
	}
	return func(p *corecatchup.Policy) {
		for _, f := range changed {
			f.copy(p, &fl.v)
		}
		p.OwnedTargets = append(p.OwnedTargets, fl.add...)
		p.OwnedTargets = slices.DeleteFunc(p.OwnedTargets, func(t string) bool { return slices.Contains(fl.remove, t) })
	}, nil
}
