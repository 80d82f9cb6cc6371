package catchup

import (
	"testing"
	"time"
)

// Each case feeds samples (offset from t0, exec id, seq) and checks the
// verdict after the last one.
func TestStallDetector(t *testing.T) {
	p := DefaultPolicy()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	iv := p.ObserveInterval
	// every returns samples every interval from `from` to `to` inclusive.
	every := func(from, to time.Duration, exec, seq uint64) []progressSample {
		var out []progressSample
		for d := from; d <= to; d += iv {
			out = append(out, progressSample{t0.Add(d), exec, seq})
		}
		return out
	}
	cat := func(parts ...[]progressSample) []progressSample {
		var out []progressSample
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	grace := p.StartupWindow
	tests := []struct {
		name    string
		samples []progressSample
		want    Verdict
	}{
		{"new job in its startup window", every(0, grace-iv, 0, 0), VerdictGrace},
		{"grace over: suspect", every(0, grace, 0, 0), VerdictSuspect},
		{"confirmation not yet over", every(0, grace+p.Confirmation-iv, 0, 0), VerdictSuspect},
		{"idle + confirmation after grace: stalled", every(0, grace+p.Confirmation, 0, 0), VerdictStalled},
		{"new execution gets a fresh grace", cat(every(0, grace, 0, 0), every(grace+iv, grace+iv+p.Confirmation, 1, 0)), VerdictGrace},
		{"progress after grace is healthy", cat(every(0, grace, 1, 0), every(grace+iv, grace+iv+p.Idle-iv, 1, 1)), VerdictHealthy},
		{"idle after progress: suspect", cat(every(0, grace, 1, 0), every(grace+iv, grace+iv+p.Idle, 1, 1)), VerdictSuspect},
		{"idle + confirmation after progress: stalled", cat(every(0, grace, 1, 0), every(grace+iv, grace+iv+p.Idle+p.Confirmation, 1, 1)), VerdictStalled},
		{"progress far beyond the soft slice stays healthy", func() []progressSample {
			var out []progressSample
			for d, seq := time.Duration(0), uint64(0); d <= 4*p.SoftSlice; d += iv {
				if d%(5*time.Minute) == 0 {
					seq++
				}
				out = append(out, progressSample{t0.Add(d), 1, seq})
			}
			return out
		}(), VerdictHealthy},
		{"a gap longer than three intervals resets suspicion", cat(every(0, grace, 0, 0),
			[]progressSample{{t0.Add(grace + 3*iv + time.Second), 0, 0}}), VerdictHealthy},
		{"a gap of exactly three intervals does not", cat(every(0, grace, 0, 0),
			[]progressSample{{t0.Add(grace + 3*iv), 0, 0}}), VerdictStalled},
		{"after a gap the full window is needed again", cat(every(0, grace, 0, 0),
			every(grace+4*iv, grace+4*iv+p.Idle+p.Confirmation-iv, 0, 0)), VerdictSuspect},
		{"after a gap, idle + confirmation stalls", cat(every(0, grace, 0, 0),
			every(grace+4*iv, grace+4*iv+p.Idle+p.Confirmation, 0, 0)), VerdictStalled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &stallDetector{p: p}
			var o StallObservation
			for _, s := range tc.samples {
				o = d.observe(s)
			}
			if o.Verdict != tc.want {
				t.Fatalf("verdict %s (%s), want %s", o.Verdict, o.Detail, tc.want)
			}
		})
	}
}
