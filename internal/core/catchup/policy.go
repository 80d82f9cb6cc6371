package catchup

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// Policy is the catch-up configuration (DESIGN.md §4). Zero fields take
// the defaults of DefaultPolicy, except Enabled (false) and OwnedTargets
// (none). It is persisted on the master's first start; every later master
// must bring the same policy (EnsurePolicy).
type Policy struct {
	Enabled bool `json:"enabled"`
	// MaxJobs is the fleet capacity: slots 0..MaxJobs-1.
	MaxJobs int `json:"max_jobs"`
	// ThresholdGenerations is the pending sealed generations at or above
	// which a table is admitted.
	ThresholdGenerations int `json:"threshold_generations"`
	// StatsMaxAge: older statistics are stale and admit nothing.
	StatsMaxAge     time.Duration `json:"stats_max_age_ns"`
	ObserveInterval time.Duration `json:"observe_interval_ns"`
	// SoftSlice is handed to the executor: it stops starting operations
	// after it; the controller never kills for elapsed time.
	SoftSlice time.Duration `json:"soft_slice_ns"`
	// StartupWindow is the grace a new execution (or a new Job with no
	// execution yet) gets before stall suspicion may start.
	StartupWindow time.Duration `json:"startup_window_ns"`
	Idle          time.Duration `json:"idle_ns"`
	Confirmation  time.Duration `json:"confirmation_ns"`

	BatchBytes       int64 `json:"batch_bytes"`
	BatchGenerations int   `json:"batch_generations"`
	MergeBufferBytes int64 `json:"merge_buffer_bytes"`
	CacheBytes       int64 `json:"cache_bytes"`

	// AttentionAfter consecutive failures flag the table as needing
	// attention (retries continue at BackoffMax).
	AttentionAfter int           `json:"attention_after"`
	BackoffMin     time.Duration `json:"backoff_min_ns"`
	BackoffMax     time.Duration `json:"backoff_max_ns"`

	// OwnedTargets are the tables this fleet catches up (explicit list).
	OwnedTargets []string `json:"owned_targets"`
}

// DefaultPolicy returns the §4 defaults: disabled, no owned targets.
func DefaultPolicy() Policy {
	return Policy{
		MaxJobs:              4,
		ThresholdGenerations: 256,
		StatsMaxAge:          900 * time.Second,
		ObserveInterval:      30 * time.Second,
		SoftSlice:            1800 * time.Second,
		StartupWindow:        1800 * time.Second,
		Idle:                 600 * time.Second,
		Confirmation:         60 * time.Second,
		BatchBytes:           64 << 20,
		BatchGenerations:     8,
		MergeBufferBytes:     1 << 30,
		CacheBytes:           128 << 20,
		AttentionAfter:       3,
		BackoffMin:           120 * time.Second,
		BackoffMax:           time.Hour,
		OwnedTargets:         []string{},
	}
}

// Normalize fills zero fields with defaults, sorts and deduplicates
// OwnedTargets, and validates the result (errs.ErrInvalid naming the
// field).
func (p Policy) Normalize() (Policy, error) {
	d := DefaultPolicy()
	fill := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if p.MaxJobs == 0 {
		p.MaxJobs = d.MaxJobs
	}
	if p.ThresholdGenerations == 0 {
		p.ThresholdGenerations = d.ThresholdGenerations
	}
	fill(&p.StatsMaxAge, d.StatsMaxAge)
	fill(&p.ObserveInterval, d.ObserveInterval)
	fill(&p.SoftSlice, d.SoftSlice)
	fill(&p.StartupWindow, d.StartupWindow)
	fill(&p.Idle, d.Idle)
	fill(&p.Confirmation, d.Confirmation)
	fill(&p.BackoffMin, d.BackoffMin)
	fill(&p.BackoffMax, d.BackoffMax)
	if p.BatchBytes == 0 {
		p.BatchBytes = d.BatchBytes
	}
	if p.BatchGenerations == 0 {
		p.BatchGenerations = d.BatchGenerations
	}
	if p.MergeBufferBytes == 0 {
		p.MergeBufferBytes = d.MergeBufferBytes
	}
	if p.CacheBytes == 0 {
		p.CacheBytes = d.CacheBytes
	}
	if p.AttentionAfter == 0 {
		p.AttentionAfter = d.AttentionAfter
	}
	targets := slices.Clone(p.OwnedTargets)
	slices.Sort(targets)
	p.OwnedTargets = slices.Compact(targets)
	if p.OwnedTargets == nil {
		p.OwnedTargets = []string{}
	}
	for _, t := range p.OwnedTargets {
		if err := coord.ValidateTable(t); err != nil {
			return p, fmt.Errorf("catch-up policy owned_targets: %w", err)
		}
	}
	switch {
	case p.MaxJobs < 0 || p.MaxJobs > 1024:
		return p, fmt.Errorf("catch-up policy max_jobs %d: want 1..1024: %w", p.MaxJobs, errs.ErrInvalid)
	case p.ThresholdGenerations < 0:
		return p, fmt.Errorf("catch-up policy threshold_generations %d is negative: %w", p.ThresholdGenerations, errs.ErrInvalid)
	case p.BackoffMax < p.BackoffMin:
		return p, fmt.Errorf("catch-up policy backoff_max %s is below backoff_min %s: %w", p.BackoffMax, p.BackoffMin, errs.ErrInvalid)
	case p.AttentionAfter < 0 || p.BatchGenerations < 0 || p.BatchBytes < 0 || p.MergeBufferBytes < 0 || p.CacheBytes < 0:
		return p, fmt.Errorf("catch-up policy has a negative size or count: %w", errs.ErrInvalid)
	}
	for _, d := range []time.Duration{p.StatsMaxAge, p.ObserveInterval, p.SoftSlice, p.StartupWindow, p.Idle, p.Confirmation, p.BackoffMin} {
		if d < 0 {
			return p, fmt.Errorf("catch-up policy has a negative duration %s: %w", d, errs.ErrInvalid)
		}
	}
	return p, nil
}

// Owns reports whether table is an owned target.
func (p Policy) Owns(table string) bool {
	_, ok := slices.BinarySearch(p.OwnedTargets, table)
	return ok
}

// Diff names the JSON fields in which two normalized policies differ.
func (p Policy) Diff(o Policy) []string {
	var out []string
	a, b := reflect.ValueOf(p), reflect.ValueOf(o)
	for i := 0; i < a.NumField(); i++ {
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, strings.Split(a.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return out
}

// PolicyMismatchError is returned when a master brings a policy other
// than the persisted one. It wraps ErrPolicyMismatch.
type PolicyMismatchError struct {
	Key    string
	Fields []string
}

// Error names the key and the differing fields.
func (e *PolicyMismatchError) Error() string {
	return fmt.Sprintf("etcd key %s: this master's catch-up policy differs from the persisted one in %s; "+
		"refusing to start: compare with 'walctl catchup policy show', then either change the stored policy "+
		"with 'walctl catchup policy set' (e.g. --owned-targets) or bring this master's configuration back to it",
		e.Key, strings.Join(e.Fields, ", "))
}

// Unwrap makes errors.Is(err, ErrPolicyMismatch) hold.
func (e *PolicyMismatchError) Unwrap() error { return ErrPolicyMismatch }

// ensurePolicy persists p create-if-absent, or checks it against the
// persisted policy, and returns the normalized policy and the revision at
// which the persisted one was last modified. A different persisted policy
// fails closed with *PolicyMismatchError; an unknown record with
// coord.ErrUnknownRecord. The transaction is idempotent, so an ambiguous
// outcome is resolved by calling again.
func (s *Store) ensurePolicy(ctx context.Context, p Policy) (Policy, int64, error) {
	p, err := p.Normalize()
	if err != nil {
		return p, 0, err
	}
	k := s.k.policy()
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, encode(KindPolicy, policyRecord{hdr(KindPolicy), p}))).
		Else(clientv3.OpGet(k)).
		Commit()
	cancel()
	if err != nil {
		return p, 0, unavailable(ctx, s.c, "persist catch-up policy", err)
	}
	if resp.Succeeded {
		return p, resp.Header.Revision, nil
	}
	kv := resp.Responses[0].GetResponseRange().Kvs[0]
	var rec policyRecord
	if err := decodeKV(kv, KindPolicy, &rec); err != nil {
		return p, 0, err
	}
	if rec.OwnedTargets == nil {
		rec.OwnedTargets = []string{}
	}
	if diff := p.Diff(rec.Policy); len(diff) > 0 {
		return p, 0, &PolicyMismatchError{Key: k, Fields: diff}
	}
	return p, kv.ModRevision, nil
}
