package catchup

import (
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
)

func TestPolicyDefaults(t *testing.T) {
	p, err := Policy{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultPolicy()
	if diff := p.Diff(want); len(diff) != 0 {
		t.Fatalf("zero policy normalizes to something else than the defaults in %v", diff)
	}
	if p.Enabled || p.MaxJobs != 4 || p.ThresholdGenerations != 256 || p.StatsMaxAge != 900*time.Second ||
		p.ObserveInterval != 30*time.Second || p.SoftSlice != 1800*time.Second || p.StartupWindow != 1800*time.Second ||
		p.Idle != 600*time.Second || p.Confirmation != 60*time.Second || p.BatchBytes != 64<<20 ||
		p.BatchGenerations != 8 || p.MergeBufferBytes != 1<<30 || p.CacheBytes != 128<<20 ||
		p.AttentionAfter != 3 || p.BackoffMin != 120*time.Second || p.BackoffMax != time.Hour || len(p.OwnedTargets) != 0 {
		t.Fatalf("defaults differ from DESIGN.md §4: %+v", p)
	}
}

func TestPolicyNormalize(t *testing.T) {
	p, err := Policy{OwnedTargets: []string{"b", "a", "b"}}.Normalize()
	if err != nil || !slices.Equal(p.OwnedTargets, []string{"a", "b"}) || !p.Owns("a") || p.Owns("c") {
		t.Fatalf("owned targets %v, %v", p.OwnedTargets, err)
	}
	for name, bad := range map[string]Policy{
		"path in target":     {OwnedTargets: []string{"../x"}},
		"negative max jobs":  {MaxJobs: -1},
		"backoff inverted":   {BackoffMin: time.Hour, BackoffMax: time.Minute},
		"negative idle":      {Idle: -time.Second},
		"negative threshold": {ThresholdGenerations: -5},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestPolicyDiff(t *testing.T) {
	a := DefaultPolicy()
	b := a
	b.Enabled, b.Idle, b.OwnedTargets = true, time.Minute, []string{"x"}
	if got := a.Diff(b); !slices.Equal(got, []string{"enabled", "idle_ns", "owned_targets"}) {
		t.Fatalf("diff %v", got)
	}
}

var k8sName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestJobName(t *testing.T) {
	long := "A_very_long_Table_name_" + "with_many_characters_0123456789_0123456789_0123456789_0123456789"
	seen := map[string]bool{}
	for _, tc := range []struct {
		prefix, table string
		attempt       int
	}{
		{"/walctl/v1", "t1", 1}, {"/walctl/v1", "t1", 2}, {"/walctl/v1", "T1", 1}, {"/other", "t1", 1},
		{"/walctl/v1", "_x_", 1}, {"/walctl/v1", long, 123456}, {"/walctl/v1", long + "x", 123456},
	} {
		n := JobName(tc.prefix, tc.table, tc.attempt)
		if len(n) > 63 || !k8sName.MatchString(n) {
			t.Errorf("JobName(%q, %q, %d) = %q: not a Kubernetes name", tc.prefix, tc.table, tc.attempt, n)
		}
		if n != JobName(tc.prefix, tc.table, tc.attempt) {
			t.Errorf("JobName is not deterministic")
		}
		if seen[n] {
			t.Errorf("JobName collision: %s", n)
		}
		seen[n] = true
	}
}
