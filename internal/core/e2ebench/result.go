package e2ebench

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/walctl/walctl/internal/core/cpuload"
	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// Result is what Run measured (the JSON shape of `walctl bench e2e`).
// Rates are MiB/s (2^20 bytes per second), times seconds.
type Result struct {
	Dir   string `json:"dir"`
	Table string `json:"table"`
	// The run's set-up.
	DurationS     float64 `json:"duration_s"`
	TargetMiBps   float64 `json:"target_mib_per_s"`
	RateOfDD      float64 `json:"target_of_dd,omitempty"`
	GenerationAge float64 `json:"generation_age_s"`
	Producers     int     `json:"producers"`
	Shards        int     `json:"shards"`
	EntryBytes    int64   `json:"entry_bytes"`
	// ProduceSeconds is how long the producers appended.
	ProduceSeconds float64 `json:"produce_s"`
	// Load is how busy the machine's CPUs were while the producers
	// appended.
	cpuload.Load
	// ACKed: everything the producers were told is durable.
	AckedEntries int64   `json:"acked_entries"`
	AckedRows    int64   `json:"acked_rows"`
	AckedBytes   int64   `json:"acked_bytes"`
	AckedMiBps   float64 `json:"acked_mib_per_s"`
	// PublishedMiBps is the bytes visible in a published version by the
	// time the producers stopped, over ProduceSeconds.
	PublishedMiBps float64 `json:"published_mib_per_s"`
	// Visible: what became visible by the end (after the drain).
	VisibleEntries int64 `json:"visible_entries"`
	VisibleRows    int64 `json:"visible_rows"`
	VisibleBytes   int64 `json:"visible_bytes"`
	// Drained tells whether every ACKed entry became visible within the
	// drain timeout; DrainSeconds is how long that took after the
	// producers stopped.
	Drained      bool    `json:"drained"`
	DrainSeconds float64 `json:"drain_s"`
	// Unknown counts appends whose outcome the producers could not know;
	// EarlyEntries entries shown before their ACK was recorded (freshness
	// 0); UnackedVisible positions shown that no ACK named.
	Unknown        int64 `json:"unknown_appends"`
	EarlyEntries   int64 `json:"early_entries"`
	UnackedVisible int64 `json:"unacked_visible"`
	// Freshness of every ACKed entry: ACK to first observed visibility;
	// for the Censored entries not visible by the end (not drained), their
	// age then, so the percentiles are lower bounds.
	Freshness Percentiles `json:"freshness"`
	Censored  int64       `json:"freshness_censored"`
	// Backlog over the producing part of the run.
	Backlog BacklogSummary `json:"backlog"`
	// Versions is how many table versions were observed; TableVersion and
	// TableRows the last one and the rows it holds.
	Versions     int    `json:"versions_observed"`
	TableVersion uint64 `json:"table_version"`
	TableRows    int64  `json:"table_rows"`
	// PeakRSS of each process of the run.
	PeakRSS []ProcessRSS `json:"peak_rss"`
	// DDBefore and DDAfter measure the disk right before and after; the
	// ratios are to the higher of the two.
	DDBefore           walbench.DDResult `json:"dd_before"`
	DDAfter            walbench.DDResult `json:"dd_after"`
	DDMiBps            float64           `json:"dd_mib_per_s"`
	AckedRatioToDD     float64           `json:"acked_ratio_to_dd"`
	PublishedRatioToDD float64           `json:"published_ratio_to_dd"`
	// Samples is the series, one point per second.
	Samples []Sample `json:"samples"`
}

// BacklogSummary describes the backlog (ACKed, not yet visible) over the
// producing part of the run. MiddleMiB and EndMiB are its means over the
// middle and the last third; it is Bounded when EndMiB ≤ MiddleMiB +
// ToleranceMiB (two seconds of the ACKed rate). SlopeMiBPerMin is the
// least-squares slope over the last two thirds.
type BacklogSummary struct {
	MaxMiB         float64 `json:"max_mib"`
	MaxEntries     int64   `json:"max_entries"`
	MiddleMiB      float64 `json:"middle_third_mean_mib"`
	EndMiB         float64 `json:"last_third_mean_mib"`
	ToleranceMiB   float64 `json:"tolerance_mib"`
	SlopeMiBPerMin float64 `json:"slope_mib_per_min"`
	Bounded        bool    `json:"bounded"`
}

// ProcessRSS is one process's peak resident set (VmHWM).
type ProcessRSS struct {
	Process string  `json:"process"`
	Bytes   int64   `json:"peak_rss_bytes"`
	MiB     float64 `json:"peak_rss_mib"`
}

func newResult(dir string, cfg Config) Result {
	r := Result{Dir: dir, Table: Table, DurationS: cfg.Duration.Seconds(), TargetMiBps: cfg.Rate / (1 << 20),
		GenerationAge: max(cfg.Engine.MaxGenerationAge, 0).Seconds(), Producers: cfg.Producers, Shards: cfg.Shards,
		EntryBytes: cfg.EntryBytes, PeakRSS: []ProcessRSS{}, Samples: []Sample{}}
	if cfg.Rate == 0 {
		r.RateOfDD = cfg.RateOfDD
	}
	return r
}

// setRates records the rates at the producers' end.
func (r *Result) setRates(t Totals) {
	if r.ProduceSeconds > 0 {
		r.AckedMiBps = mib(t.AckedBytes) / r.ProduceSeconds
		r.PublishedMiBps = mib(t.VisibleBytes) / r.ProduceSeconds
	}
}

func (r *Result) setTotals(t Totals) {
	r.AckedEntries, r.AckedRows, r.AckedBytes = t.AckedEntries, t.AckedRows, t.AckedBytes
	r.VisibleEntries, r.VisibleRows, r.VisibleBytes = t.VisibleEntries, t.VisibleRows, t.VisibleBytes
	r.EarlyEntries, r.UnackedVisible, r.Freshness, r.Censored = t.Early, t.Unacked, t.Freshness, t.Censored
}

// setBacklog summarizes the backlog samples taken while producing.
func (r *Result) setBacklog() {
	var prod []Sample
	for _, s := range r.Samples {
		if s.Second <= r.ProduceSeconds {
			prod = append(prod, s)
		}
		r.Backlog.MaxMiB = max(r.Backlog.MaxMiB, s.BacklogMiB)
		r.Backlog.MaxEntries = max(r.Backlog.MaxEntries, s.BacklogEntries)
	}
	r.Backlog.ToleranceMiB = 2 * r.AckedMiBps
	n := len(prod)
	if n < 3 {
		r.Backlog.Bounded = true // too short to tell growth from noise
		return
	}
	r.Backlog.MiddleMiB = meanBacklog(prod[n/3 : 2*n/3])
	r.Backlog.EndMiB = meanBacklog(prod[2*n/3:])
	r.Backlog.Bounded = r.Backlog.EndMiB <= r.Backlog.MiddleMiB+r.Backlog.ToleranceMiB
	r.Backlog.SlopeMiBPerMin = 60 * slope(prod[n/3:])
}

func meanBacklog(ss []Sample) float64 {
	var sum float64
	for _, s := range ss {
		sum += s.BacklogMiB
	}
	return sum / float64(len(ss))
}

// slope is the least-squares slope of backlog MiB over seconds.
func slope(ss []Sample) float64 {
	n := float64(len(ss))
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		sx, sy, sxx, sxy = sx+s.Second, sy+s.BacklogMiB, sxx+s.Second*s.Second, sxy+s.Second*s.BacklogMiB
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func (r *Result) setDD() {
	r.DDMiBps = max(r.DDBefore.MiBps, r.DDAfter.MiBps)
	if r.DDMiBps > 0 {
		r.AckedRatioToDD, r.PublishedRatioToDD = r.AckedMiBps/r.DDMiBps, r.PublishedMiBps/r.DDMiBps
	}
}

// selfRSS is this process's peak resident set: the producers, the WAL
// engine, the embedded etcd and the worker all run in it.
func selfRSS() ProcessRSS {
	p := ProcessRSS{Process: "walctl (producers, WAL engine, embedded etcd and worker in-process)"}
	p.Bytes = vmHWM("/proc/self/status")
	p.MiB = mib(p.Bytes)
	return p
}

// vmHWM reads VmHWM (kB) from a /proc status file, in bytes; 0 if absent.
func vmHWM(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
