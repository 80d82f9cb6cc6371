package catchup

import (
	"fmt"
	"time"
)

// progressSample is one observation of a table's admission record by the
// controller, on the injected clock.
type progressSample struct {
	At     time.Time
	ExecID uint64
	Seq    uint64
}

// Verdict is the stall detector's reading after a sample.
type Verdict string

// Verdicts.
const (
	// VerdictGrace: a new execution (or a Job with none yet) is inside its
	// startup window.
	VerdictGrace Verdict = "grace"
	// VerdictHealthy: progress within the idle window.
	VerdictHealthy Verdict = "healthy"
	// VerdictSuspect: idle for the idle window; confirming.
	VerdictSuspect Verdict = "suspect"
	// VerdictStalled: idle for the idle window plus the confirmation
	// window, with no sampling gap: cancel (by CAS on the observed seq).
	VerdictStalled Verdict = "stalled"
)

// stallDetector implements rule 15's stall detection for one table. It is
// driven by samples only and never by elapsed Job time, so progress beyond
// the soft slice keeps a Job alive however long it runs. Its state is in
// memory: a restarted master starts with a fresh baseline and grace, which
// can only delay a cancellation, never hasten one.
//
// Rules, for a sample at time t:
//   - the first sample, and a new execution id, start a fresh grace period
//     (t + StartupWindow) and a fresh idle baseline;
//   - a gap since the previous sample longer than three observe intervals
//     invalidates suspicion and restarts the idle baseline at t (continuous
//     lack of progress was not observed);
//   - a changed progress sequence restarts the idle baseline (heartbeats
//     are not in the sequence, so they cannot);
//   - otherwise, once past the grace period and idle for Idle, the table is
//     suspect, and stalled when still unchanged Confirmation later.
type stallDetector struct {
	p            Policy
	primed       bool
	last         time.Time
	execID, seq  uint64
	idleSince    time.Time
	graceUntil   time.Time
	suspectSince time.Time
}

// StallObservation is the detector's state for status output.
type StallObservation struct {
	Verdict      Verdict    `json:"verdict"`
	SampledAt    time.Time  `json:"sampled_at"`
	ExecID       uint64     `json:"exec_id"`
	Seq          uint64     `json:"seq"`
	IdleSince    time.Time  `json:"idle_since"`
	GraceUntil   time.Time  `json:"grace_until"`
	SuspectSince *time.Time `json:"suspect_since"`
	Detail       string     `json:"detail"`
}

func (d *stallDetector) observe(s progressSample) StallObservation {
	gap := d.primed && s.At.Sub(d.last) > 3*d.p.ObserveInterval
	detail := ""
	switch {
	case !d.primed || s.ExecID != d.execID:
		d.graceUntil = s.At.Add(d.p.StartupWindow)
		d.idleSince, d.suspectSince = s.At, time.Time{}
		detail = fmt.Sprintf("execution %d: grace until %s", s.ExecID, d.graceUntil.UTC().Format(time.RFC3339))
	case gap:
		d.idleSince, d.suspectSince = s.At, time.Time{}
		detail = fmt.Sprintf("sampling gap of %s invalidates suspicion", s.At.Sub(d.last))
	case s.Seq != d.seq:
		d.idleSince, d.suspectSince = s.At, time.Time{}
	}
	d.primed, d.last, d.execID, d.seq = true, s.At, s.ExecID, s.Seq
	o := StallObservation{SampledAt: s.At, ExecID: s.ExecID, Seq: s.Seq, IdleSince: d.idleSince, GraceUntil: d.graceUntil, Detail: detail}
	switch {
	case s.At.Before(d.graceUntil):
		o.Verdict = VerdictGrace
	case s.At.Sub(d.idleSince) < d.p.Idle:
		o.Verdict = VerdictHealthy
	case d.suspectSince.IsZero():
		d.suspectSince = s.At
		o.Verdict = VerdictSuspect
	case s.At.Sub(d.suspectSince) >= d.p.Confirmation:
		o.Verdict = VerdictStalled
		o.Detail = fmt.Sprintf("no progress since %s (seq %d, execution %d), confirmed for %s",
			d.idleSince.UTC().Format(time.RFC3339), s.Seq, s.ExecID, s.At.Sub(d.suspectSince))
	default:
		o.Verdict = VerdictSuspect
	}
	o.SuspectSince = nonZero(d.suspectSince)
	return o
}
