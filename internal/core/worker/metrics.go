package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walctl/walctl/internal/core/publish"
)

// Claim-change events, the `event` label of ClaimChanges.
const (
	EventAcquired = "acquired"
	EventReleased = "released"
	EventLost     = "lost"
)

// OutcomeFailed is the `outcome` label of a round that returned an error;
// the other outcomes are publish.Outcome values.
const OutcomeFailed = "failed"

// Metrics are a worker's Prometheus metrics, all named walctl_worker_* and
// labelled by table. The fields are exported for tests and dashboards; they
// are only written by the worker.
type Metrics struct {
	// Rounds counts rounds by outcome: idle, published, already-published,
	// superseded, failed.
	Rounds *prometheus.CounterVec
	// Records and Bytes count what rounds of this worker committed
	// (outcome published): rows written to Lance, and WAL bytes covered.
	Records *prometheus.CounterVec
	Bytes   *prometheus.CounterVec
	// LagBytes and LagGenerations are the sealed WAL bytes and generations
	// still above the table's watermarks, measured after each round of the
	// holder (zero after an idle round). Only a worker holding the table
	// reports it; the series is deleted when the claim ends.
	LagBytes       *prometheus.GaugeVec
	LagGenerations *prometheus.GaugeVec
	// ClaimChanges counts claims acquired, released and lost (revoked,
	// expired or replaced while held).
	ClaimChanges *prometheus.CounterVec
	// ClaimHeld is 1 while this worker holds the table's claim.
	ClaimHeld *prometheus.GaugeVec
	// Fences counts rounds and acquisitions refused because this worker was
	// fenced out: a newer publisher epoch, or a lost claim.
	Fences *prometheus.CounterVec
	// Conflicts counts rounds that failed on contention (Lance commits still
	// conflicting after the publisher's attempts, a WAL epoch CAS lost).
	Conflicts *prometheus.CounterVec
	// Errors counts other failures by kind: unavailable, wal-unavailable,
	// files-damaged, corrupt, not-found, invalid, other.
	Errors *prometheus.CounterVec
}

// NewMetrics makes the worker's metrics and registers them with reg (nil:
// not registered). Like promauto it panics if a metric of the same name is
// already registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walctl", Subsystem: "worker", Name: name, Help: help,
		}, append([]string{"table"}, labels...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "walctl", Subsystem: "worker", Name: name, Help: help,
		}, []string{"table"})
	}
	m := &Metrics{
		Rounds:         counter("rounds_total", "Publication rounds by outcome.", "outcome"),
		Records:        counter("records_published_total", "Records committed to Lance by this worker."),
		Bytes:          counter("bytes_published_total", "WAL bytes covered by this worker's commits."),
		LagBytes:       gauge("publication_lag_bytes", "Sealed WAL bytes above the table's watermarks (reported by the holder)."),
		LagGenerations: gauge("publication_lag_generations", "Sealed WAL generations above the table's watermarks (reported by the holder)."),
		ClaimChanges:   counter("claim_changes_total", "Claims acquired, released and lost.", "event"),
		ClaimHeld:      gauge("claim_held", "1 while this worker holds the table's claim."),
		Fences:         counter("fences_total", "Rounds or acquisitions refused because the worker was fenced out."),
		Conflicts:      counter("conflicts_total", "Rounds failed on contention (Lance commits, WAL epoch)."),
		Errors:         counter("errors_total", "Failed rounds and acquisitions by kind.", "kind"),
	}
	if reg != nil {
		reg.MustRegister(m.Rounds, m.Records, m.Bytes, m.LagBytes, m.LagGenerations,
			m.ClaimChanges, m.ClaimHeld, m.Fences, m.Conflicts, m.Errors)
	}
	return m
}

func (m *Metrics) round(table string, res *publish.Result, err error) {
	if err != nil || res == nil {
		m.Rounds.WithLabelValues(table, OutcomeFailed).Inc()
		return
	}
	m.Rounds.WithLabelValues(table, string(res.Outcome)).Inc()
	if res.Outcome == publish.OutcomePublished {
		m.Records.WithLabelValues(table).Add(float64(res.Rows))
		m.Bytes.WithLabelValues(table).Add(float64(res.Bytes))
	}
}

func (m *Metrics) failure(table string, k errorKind) {
	switch k {
	case kindFenced:
		m.Fences.WithLabelValues(table).Inc()
	case kindConflict:
		m.Conflicts.WithLabelValues(table).Inc()
	case kindShutdown:
	default:
		m.Errors.WithLabelValues(table, string(k)).Inc()
	}
}

func (m *Metrics) acquired(table string) {
	m.ClaimChanges.WithLabelValues(table, EventAcquired).Inc()
	m.ClaimHeld.WithLabelValues(table).Set(1)
}

func (m *Metrics) ended(table string, lost bool) {
	ev := EventReleased
	if lost {
		ev = EventLost
	}
	m.ClaimChanges.WithLabelValues(table, ev).Inc()
	m.ClaimHeld.WithLabelValues(table).Set(0)
	m.LagBytes.DeleteLabelValues(table)
	m.LagGenerations.DeleteLabelValues(table)
}

func (m *Metrics) lag(table string, bytes int64, gens int) {
	m.LagBytes.WithLabelValues(table).Set(float64(bytes))
	m.LagGenerations.WithLabelValues(table).Set(float64(gens))
}
