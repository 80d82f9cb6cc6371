package catchup

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the master's catch-up metrics on /metrics. Counters are
// this process's; gauges of records (RecordsCollector) are read from etcd
// at scrape time, so every replica shows the fleet.
//
//	walctl_catchup_admissions_total{decision,source}   every admission answer (dry runs included)
//	walctl_catchup_stall_suspicions_total              a running Job became suspect
//	walctl_catchup_stall_confirmations_total           a suspicion was confirmed (cancellation follows)
//	walctl_catchup_cancellations_total{by,result}      by controller|operator; result closed|defeated
//	walctl_catchup_leader                              1 while this master leads, else 0
//	walctl_catchup_leader_terms_total                  terms this master has begun
//	walctl_catchup_leader_refused_writes_total{by}     controller writes refused: local (term over) or etcd (guard failed)
type Metrics struct {
	admissions    *prometheus.CounterVec
	suspicions    prometheus.Counter
	confirmations prometheus.Counter
	cancellations *prometheus.CounterVec
	leader        prometheus.Gauge
	terms         prometheus.Counter
	refused       *prometheus.CounterVec
}

// NewMetrics registers the catch-up metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walctl_catchup_admissions_total",
			Help: "Catch-up admission answers by decision and source (api, scan)."}, []string{"decision", "source"}),
		suspicions: prometheus.NewCounter(prometheus.CounterOpts{Name: "walctl_catchup_stall_suspicions_total",
			Help: "Running catch-up Jobs that became stall suspects."}),
		confirmations: prometheus.NewCounter(prometheus.CounterOpts{Name: "walctl_catchup_stall_confirmations_total",
			Help: "Stall suspicions confirmed (a cancellation CAS follows)."}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walctl_catchup_cancellations_total",
			Help: "Cancellation CAS outcomes by requester (controller, operator) and result (closed, defeated)."}, []string{"by", "result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walctl_catchup_leader",
			Help: "1 while this master is the catch-up leader."}),
		terms: prometheus.NewCounter(prometheus.CounterOpts{Name: "walctl_catchup_leader_terms_total",
			Help: "Leadership terms this master has begun."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walctl_catchup_leader_refused_writes_total",
			Help: "Controller writes refused because the term was over: by the local check or by etcd's guard."}, []string{"by"}),
	}
	reg.MustRegister(m.admissions, m.suspicions, m.confirmations, m.cancellations, m.leader, m.terms, m.refused)
	for _, by := range []string{"local", "etcd"} {
		m.refused.WithLabelValues(by)
	}
	return m
}

// SetLeader records whether this master leads (a new term counts once).
func (m *Metrics) SetLeader(leads bool) {
	if m == nil {
		return
	}
	if leads {
		m.terms.Inc()
		m.leader.Set(1)
		return
	}
	m.leader.Set(0)
}

func (m *Metrics) admission(d Decision, source string) {
	if m != nil {
		m.admissions.WithLabelValues(string(d), source).Inc()
	}
}

func (m *Metrics) verdict(o StallObservation) {
	if m == nil {
		return
	}
	switch {
	case o.Verdict == VerdictStalled:
		m.confirmations.Inc()
	case o.Verdict == VerdictSuspect && o.SuspectSince != nil && o.SuspectSince.Equal(o.SampledAt):
		m.suspicions.Inc()
	}
}

func (m *Metrics) cancellation(by, result string) {
	if m != nil {
		m.cancellations.WithLabelValues(by, result).Inc()
	}
}

func (m *Metrics) refusedWrite(by string) {
	if m != nil {
		m.refused.WithLabelValues(by).Inc()
	}
}

// RecordsCollector exports the fleet's catch-up records at scrape time
// (one linearizable read of List, bounded by the store's call timeout):
//
//	walctl_catchup_active_jobs                 tables with an active reservation
//	walctl_catchup_slots_used, _slots_max      fleet slots held, and max_jobs
//	walctl_catchup_retry_budget_remaining{table}   attention_after − consecutive failures
//	walctl_catchup_needs_attention{table}      1 when the budget is spent
//
// A failed read exports nothing for the scrape (and an invalid metric
// naming the error, so the scrape shows it).
type RecordsCollector struct {
	s                                        *Store
	p                                        Policy
	active, used, maxJobs, budget, attention *prometheus.Desc
}

// NewRecordsCollector returns the collector of s's records under p.
func NewRecordsCollector(s *Store, p Policy) *RecordsCollector {
	return &RecordsCollector{s: s, p: p,
		active:    prometheus.NewDesc("walctl_catchup_active_jobs", "Tables with an active catch-up reservation.", nil, nil),
		used:      prometheus.NewDesc("walctl_catchup_slots_used", "Fleet slots held.", nil, nil),
		maxJobs:   prometheus.NewDesc("walctl_catchup_slots_max", "Fleet slots (max_jobs).", nil, nil),
		budget:    prometheus.NewDesc("walctl_catchup_retry_budget_remaining", "Failed attempts left before needs-attention.", []string{"table"}, nil),
		attention: prometheus.NewDesc("walctl_catchup_needs_attention", "1 when the table's retry budget is spent.", []string{"table"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *RecordsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.used, c.maxJobs, c.budget, c.attention} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *RecordsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.callTimeout)
	defer cancel()
	l, err := c.s.List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.active, err)
		return
	}
	active := 0
	for _, e := range l.Reservations {
		if e.Phase.Active() {
			active++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(active))
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(l.SlotsUsed))
	ch <- prometheus.MustNewConstMetric(c.maxJobs, prometheus.GaugeValue, float64(c.p.MaxJobs))
	for _, b := range l.Budgets {
		ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(max(0, c.p.AttentionAfter-b.ConsecutiveFailures)), b.Table)
		ch <- prometheus.MustNewConstMetric(c.attention, prometheus.GaugeValue, boolGauge(b.NeedsAttention), b.Table)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WithMetrics returns a Store that counts into m.
func (s *Store) WithMetrics(m *Metrics) *Store {
	g := *s
	g.metrics = m
	return &g
}
