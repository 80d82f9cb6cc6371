package catchup

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	p := DefaultPolicy()
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 0}, {1, 120 * time.Second}, {2, 240 * time.Second}, {3, 480 * time.Second},
		{5, 1920 * time.Second}, {6, time.Hour}, {50, time.Hour},
	} {
		if got := backoff(p, tc.failures); got != tc.want {
			t.Errorf("backoff(%d) = %s, want %s", tc.failures, got, tc.want)
		}
	}
}

func TestAfterOutcome(t *testing.T) {
	p := DefaultPolicy()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := targetRecord{}
	for i := 1; i <= 3; i++ {
		afterOutcome(p, &rec, OutcomeFailure, now)
		if rec.ConsecutiveFailures != i || rec.NeedsAttention != (i >= 3) || !rec.NextRetry.Equal(now.Add(backoff(p, i))) {
			t.Fatalf("after failure %d: %+v", i, rec)
		}
	}
	afterOutcome(p, &rec, OutcomeCancelled, now)
	if rec.ConsecutiveFailures != 3 || !rec.NeedsAttention {
		t.Fatalf("an operator's cancellation changed the budget: %+v", rec)
	}
	afterOutcome(p, &rec, OutcomeSuccess, now)
	if rec.ConsecutiveFailures != 0 || rec.NeedsAttention || !rec.NextRetry.IsZero() || !rec.LastSuccessAt.Equal(now) {
		t.Fatalf("a success did not clear the budget: %+v", rec)
	}
}
