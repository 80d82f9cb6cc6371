package catchup

import (
	"testing"
	"time"
)

func TestDecideTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p, err := Policy{Enabled: true, OwnedTargets: []string{"t"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	fresh := &TableStats{PendingGenerations: 256, ObservedAt: now.Add(-time.Minute)}
	ok := admissionInput{now: now, owned: true, stats: fresh}
	off := p
	off.Enabled = false
	tests := []struct {
		name string
		p    Policy
		in   func(in *admissionInput)
		want Decision
	}{
		{"disabled wins over everything", off, func(in *admissionInput) { in.active = true }, DecisionDisabled},
		{"not owned", p, func(in *admissionInput) { in.owned = false }, DecisionNotOwned},
		{"repeat coalesces before stats are checked", p, func(in *admissionInput) { in.active = true; in.stats = nil }, DecisionAlreadyActive},
		{"no stats", p, func(in *admissionInput) { in.stats = nil }, DecisionNoStats},
		{"stats exactly max age are fresh", p, func(in *admissionInput) {
			in.stats = &TableStats{PendingGenerations: 256, ObservedAt: now.Add(-p.StatsMaxAge)}
		}, DecisionReserved},
		{"stale stats", p, func(in *admissionInput) {
			in.stats = &TableStats{PendingGenerations: 9999, ObservedAt: now.Add(-p.StatsMaxAge - time.Second)}
		}, DecisionStaleStats},
		{"stats not newer than the last success", p, func(in *admissionInput) { in.lastSuccessAt = fresh.ObservedAt }, DecisionStaleStats},
		{"stats newer than the last success", p, func(in *admissionInput) { in.lastSuccessAt = fresh.ObservedAt.Add(-time.Second) }, DecisionReserved},
		{"below threshold", p, func(in *admissionInput) {
			in.stats = &TableStats{PendingGenerations: 255, ObservedAt: fresh.ObservedAt}
		}, DecisionBelowThreshold},
		{"cooling down", p, func(in *admissionInput) { in.nextRetry = now.Add(time.Second) }, DecisionCoolingDown},
		{"retry time reached", p, func(in *admissionInput) { in.nextRetry = now }, DecisionReserved},
		{"capacity exhausted", p, func(in *admissionInput) { in.slotsUsed = p.MaxJobs }, DecisionCapacityExhausted},
		{"awaiting handover", p, func(in *admissionInput) { in.claimedByPeer = true }, DecisionAwaitingHandover},
		{"dry run", p, func(in *admissionInput) { in.dryRun = true }, DecisionEligible},
		{"dry run on a claimed table", p, func(in *admissionInput) { in.dryRun = true; in.claimedByPeer = true }, DecisionEligible},
		{"dry run still reports capacity", p, func(in *admissionInput) { in.dryRun = true; in.slotsUsed = 4 }, DecisionCapacityExhausted},
		{"reserved", p, func(*admissionInput) {}, DecisionReserved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := ok
			tc.in(&in)
			got, msg := decide(tc.p, in)
			if got != tc.want || msg == "" {
				t.Fatalf("decide = %s (%q), want %s", got, msg, tc.want)
			}
		})
	}
}

func TestDecisionAdmitted(t *testing.T) {
	for _, d := range []Decision{DecisionDisabled, DecisionNotOwned, DecisionAlreadyActive, DecisionNoStats,
		DecisionStaleStats, DecisionBelowThreshold, DecisionCoolingDown, DecisionCapacityExhausted, DecisionEligible} {
		if d.Admitted() {
			t.Errorf("%s writes a reservation", d)
		}
	}
	if !DecisionReserved.Admitted() || !DecisionAwaitingHandover.Admitted() {
		t.Error("reserved and awaiting_handover must write the reservation")
	}
}
