package e2ebench

import (
	"math"
	"testing"
	"time"
)

// Freshness is per entry: an entry becomes visible at the first observed
// version whose watermark covers it, and only then; the backlog is what is
// ACKed and not yet visible.
func TestTrackerFreshness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := NewTracker(t0)
	// Shard 0: positions 1..4 ACKed at 0, 100, 200, 300 ms; shard 1: 1..2
	// at 50 and 150 ms (recorded out of order, as concurrent producers do).
	for i := 1; i <= 4; i++ {
		tr.Acked(0, uint64(i), 10, 100, at(100*(i-1)))
	}
	tr.Acked(1, 2, 10, 100, at(150))
	tr.Acked(1, 1, 10, 100, at(50))

	if s := tr.Sample(at(400)); s.BacklogEntries != 6 || s.BacklogBytes != 600 || s.OldestUnpublishedS != 0.4 || s.Visible != 0 {
		t.Fatalf("before any version: %+v", s)
	}
	// Version 1 at 1 s publishes shard 0 through 2 and shard 1 through 1.
	if n := tr.Observed(map[int]uint64{0: 2, 1: 1}, at(1000)); n != 3 {
		t.Fatalf("version 1 made %d visible, want 3", n)
	}
	// The same watermarks again (a fence version) make nothing new visible.
	if n := tr.Observed(map[int]uint64{0: 2, 1: 1}, at(1500)); n != 0 {
		t.Fatalf("a repeated watermark made %d visible", n)
	}
	s := tr.Sample(at(1600))
	if s.Visible != 3 || s.PublishedEntries != 3 || s.BacklogEntries != 3 || s.BacklogBytes != 300 {
		t.Fatalf("after version 1: %+v", s)
	}
	// Oldest unpublished: shard 1 position 2, ACKed at 150 ms.
	if s.OldestUnpublishedS != 1.45 {
		t.Fatalf("oldest unpublished %.3fs, want 1.45", s.OldestUnpublishedS)
	}
	// Freshness of version 1's entries: 1000, 900 (shard 0) and 950 ms.
	if s.Freshness.Count != 3 || s.Freshness.P50 != 0.95 || s.Freshness.Max != 1.0 {
		t.Fatalf("sample freshness %+v", s.Freshness)
	}
	// Not visible yet: counted with their age, a lower bound (censored):
	// at 2 s the three visible ones (0.9–1.0 s) and three of 1.7–1.85 s.
	if tot := tr.Totals(at(2000)); tot.Censored != 3 || tot.Freshness.Count != 6 || math.Abs(tot.Freshness.Max-1.85) > 1e-9 || math.Abs(tot.Freshness.P50-1.7) > 1e-9 {
		t.Fatalf("censored totals %+v", tot)
	}
	// Version 2 at 3 s publishes everything.
	if n := tr.Observed(map[int]uint64{0: 4, 1: 2}, at(3000)); n != 3 || !tr.AllVisible() {
		t.Fatalf("version 2 made %d visible, all visible %v", n, tr.AllVisible())
	}
	tot := tr.Totals(at(3000))
	// Freshness per entry, sorted: 0.9 0.95 1.0 2.7 2.8 2.85.
	if tot.Freshness.Count != 6 || tot.Freshness.P50 != 2.7 || tot.Freshness.P99 != 2.85 || tot.Freshness.Max != 2.85 {
		t.Fatalf("freshness %+v", tot.Freshness)
	}
	if tot.AckedRows != 60 || tot.VisibleRows != 60 || tot.VisibleBytes != 600 || tot.Early != 0 || tot.Unacked != 0 || tot.Censored != 0 {
		t.Fatalf("totals %+v", tot)
	}
	if s := tr.Sample(at(3100)); s.BacklogEntries != 0 || s.OldestUnpublishedS != 0 {
		t.Fatalf("drained: %+v", s)
	}
}

// An ACK recorded after a version already showed its position (the
// producer's callback ran late) counts as visible at once, freshness 0,
// never negative; a shown position no ACK names is counted apart.
func TestTrackerLateAckAndUnknown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := NewTracker(t0)
	tr.Acked(0, 1, 1, 10, t0)
	if n := tr.Observed(map[int]uint64{0: 3}, t0.Add(time.Second)); n != 1 {
		t.Fatalf("made %d visible, want 1", n)
	}
	if tot := tr.Totals(t0.Add(time.Second)); tot.Unacked != 2 {
		t.Fatalf("unacked %d, want 2", tot.Unacked)
	}
	tr.Acked(0, 2, 1, 10, t0.Add(2*time.Second))
	tot := tr.Totals(t0.Add(2 * time.Second))
	if tot.Early != 1 || tot.Unacked != 1 || tot.VisibleEntries != 2 || !tr.AllVisible() {
		t.Fatalf("totals %+v", tot)
	}
	if tot.Freshness.Count != 2 || tot.Freshness.P50 != 1 || tot.Freshness.Max != 1 {
		t.Fatalf("freshness %+v (the late ACK must count 0)", tot.Freshness)
	}
}

// The backlog summary tells a growing backlog from a flat one.
func TestBacklogBounded(t *testing.T) {
	series := func(f func(sec int) float64) []Sample {
		var ss []Sample
		for i := 1; i <= 60; i++ {
			ss = append(ss, Sample{Second: float64(i), BacklogMiB: f(i)})
		}
		return ss
	}
	flat := Result{ProduceSeconds: 60, AckedMiBps: 10, Samples: series(func(s int) float64 { return float64(s%10) * 10 })}
	flat.setBacklog()
	if !flat.Backlog.Bounded || flat.Backlog.MaxMiB != 90 {
		t.Fatalf("sawtooth backlog: %+v", flat.Backlog)
	}
	grow := Result{ProduceSeconds: 60, AckedMiBps: 10, Samples: series(func(s int) float64 { return float64(s) * 5 })}
	grow.setBacklog()
	if grow.Backlog.Bounded || grow.Backlog.SlopeMiBPerMin < 299 || grow.Backlog.SlopeMiBPerMin > 301 {
		t.Fatalf("growing backlog: %+v", grow.Backlog)
	}
}
