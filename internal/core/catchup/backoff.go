package catchup

import "time"

// backoff is the delay before readmission after failures consecutive
// failed attempts: BackoffMin doubling per further failure, capped at
// BackoffMax (§4: 120 s → 1 h). No failure, no delay.
func backoff(p Policy, failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := p.BackoffMin
	for i := 1; i < failures && d < p.BackoffMax; i++ {
		d *= 2
	}
	return min(d, p.BackoffMax)
}

// needsAttention reports whether consecutive failures call for an
// operator (§4: after 3). Retries continue; the flag is for humans.
func needsAttention(p Policy, failures int) bool {
	return p.AttentionAfter > 0 && failures >= p.AttentionAfter
}

// afterOutcome applies an attempt's outcome to the failure budget: a
// success clears it, a failure counts and backs off, a cancellation by an
// operator leaves it as it was.
func afterOutcome(p Policy, rec *targetRecord, o Outcome, now time.Time) {
	switch o {
	case OutcomeSuccess:
		rec.ConsecutiveFailures = 0
		rec.NextRetry = time.Time{}
		rec.LastSuccessAt = now
	case OutcomeFailure:
		rec.ConsecutiveFailures++
		rec.NextRetry = now.Add(backoff(p, rec.ConsecutiveFailures))
	}
	rec.NeedsAttention = needsAttention(p, rec.ConsecutiveFailures)
	rec.Outcome = o
	rec.FinishedAt = now
}
