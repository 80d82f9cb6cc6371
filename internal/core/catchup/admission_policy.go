package catchup

import (
	"fmt"
	"time"
)

// Decision is the answer to an admission request (issue 7). Its string is
// part of the API's documented JSON.
type Decision string

// Decisions, in the order admission checks them.
const (
	// DecisionDisabled: catch-up is disabled by policy.
	DecisionDisabled Decision = "disabled"
	// DecisionNotOwned: the table is not an owned target.
	DecisionNotOwned Decision = "not_owned"
	// DecisionAlreadyActive: the table already has a reservation; the
	// request coalesces with it and the failure budget is kept.
	DecisionAlreadyActive Decision = "already_active"
	// DecisionNoStats: no backlog statistics for the table.
	DecisionNoStats Decision = "no_stats"
	// DecisionStaleStats: statistics older than stats_max_age, or not newer
	// than the last successful catch-up.
	DecisionStaleStats Decision = "stale_stats"
	// DecisionBelowThreshold: fewer pending generations than the threshold.
	DecisionBelowThreshold Decision = "below_threshold"
	// DecisionCoolingDown: the retry backoff after a failure has not passed.
	DecisionCoolingDown Decision = "cooling_down"
	// DecisionCapacityExhausted: every fleet slot is held.
	DecisionCapacityExhausted Decision = "capacity_exhausted"
	// DecisionAwaitingHandover: reserved, but a worker holds the claim; the
	// Job is created once the worker releases at the end of its slice.
	DecisionAwaitingHandover Decision = "awaiting_handover"
	// DecisionEligible: a dry run that would have reserved.
	DecisionEligible Decision = "eligible"
	// DecisionReserved: reservation and slot written; the Job follows.
	DecisionReserved Decision = "reserved"
)

// Admitted reports whether the decision wrote (or found) a reservation.
func (d Decision) Admitted() bool {
	return d == DecisionReserved || d == DecisionAwaitingHandover
}

// admissionInput is everything one decision looks at, read at one etcd
// revision.
type admissionInput struct {
	now           time.Time
	owned         bool
	active        bool
	stats         *TableStats
	lastSuccessAt time.Time
	nextRetry     time.Time
	slotsUsed     int
	claimedByPeer bool // a claim exists that is not this table's executor
	dryRun        bool
}

// decide applies rule 14 in a fixed order: policy and ownership, then
// deduplication (so a repeat coalesces whatever else changed), then
// statistics, threshold, backoff, capacity and handover.
func decide(p Policy, in admissionInput) (Decision, string) {
	switch {
	case !p.Enabled:
		return DecisionDisabled, "catch-up is disabled by policy"
	case !in.owned:
		return DecisionNotOwned, "the table is not an owned target of this fleet"
	case in.active:
		return DecisionAlreadyActive, "the table already has an active catch-up; the request coalesces with it"
	case in.stats == nil:
		return DecisionNoStats, "no backlog statistics; run a backlog scan"
	}
	age := in.now.Sub(in.stats.ObservedAt)
	switch {
	case age > p.StatsMaxAge:
		return DecisionStaleStats, fmt.Sprintf("statistics observed %s ago, older than %s", age.Round(time.Second), p.StatsMaxAge)
	case !in.lastSuccessAt.IsZero() && !in.stats.ObservedAt.After(in.lastSuccessAt):
		return DecisionStaleStats, "statistics predate the last successful catch-up; a newer scan is needed"
	case in.stats.PendingGenerations < p.ThresholdGenerations:
		return DecisionBelowThreshold, fmt.Sprintf("%d pending sealed generations, threshold %d",
			in.stats.PendingGenerations, p.ThresholdGenerations)
	case in.now.Before(in.nextRetry):
		return DecisionCoolingDown, fmt.Sprintf("backing off after a failure until %s", in.nextRetry.UTC().Format(time.RFC3339))
	case in.slotsUsed >= p.MaxJobs:
		return DecisionCapacityExhausted, fmt.Sprintf("all %d catch-up slots are held", p.MaxJobs)
	case in.dryRun && in.claimedByPeer:
		return DecisionEligible, "dry run: would reserve; a worker holds the claim, so the Job would wait for its release"
	case in.dryRun:
		return DecisionEligible, "dry run: would reserve and start a Job"
	case in.claimedByPeer:
		return DecisionAwaitingHandover, "reserved; a worker holds the claim, the Job starts when it releases"
	}
	return DecisionReserved, "reserved; the Job is being started"
}
