package e2ebench

import (
	"slices"
	"sync"
	"time"

	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// Tracker is the freshness accounting of a run: it learns when each entry
// was ACKed (shard, position) and which watermarks each observed table
// version carries, and derives per entry the time from its ACK to its first
// visibility. A position at or below an observed watermark that was not
// seen before becomes visible at that observation. Safe for concurrent use.
type Tracker struct {
	mu     sync.Mutex
	start  time.Time
	shards map[int]*shardTrack

	ackedEntries, ackedRows, ackedBytes       int64
	visibleEntries, visibleRows, visibleBytes int64
	// early counts entries whose ACK was recorded after a version showing
	// them was observed (the ACK callback ran late): freshness 0.
	early int64
	// unacked counts positions made visible that no ACK named (an append
	// whose outcome the producer could not know).
	unacked int64

	fresh  []time.Duration // every visible entry's freshness
	recent []time.Duration // those since the last Sample
}

type shardTrack struct {
	acks    []ack  // index position-1
	visible uint64 // the highest watermark observed
	oldest  uint64 // lowest position that may still be unpublished and ACKed
}

type ack struct {
	at          time.Time
	rows, bytes int64
	seen        bool // ACK recorded
}

// NewTracker starts the accounting at start (Sample times are relative to it).
func NewTracker(start time.Time) *Tracker {
	return &Tracker{start: start, shards: map[int]*shardTrack{}}
}

func (t *Tracker) shard(s int) *shardTrack {
	st := t.shards[s]
	if st == nil {
		st = &shardTrack{oldest: 1}
		t.shards[s] = st
	}
	return st
}

// Acked records that the entry at (shard, position) of rows and bytes was
// ACKed at at.
func (t *Tracker) Acked(shard int, position uint64, rows, bytes int64, at time.Time) {
	if position == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.shard(shard)
	for uint64(len(st.acks)) < position {
		st.acks = append(st.acks, ack{})
	}
	a := &st.acks[position-1]
	if a.seen {
		return
	}
	*a = ack{at: at, rows: rows, bytes: bytes, seen: true}
	t.ackedEntries, t.ackedRows, t.ackedBytes = t.ackedEntries+1, t.ackedRows+rows, t.ackedBytes+bytes
	if position <= st.visible { // shown before its ACK was recorded
		t.early, t.unacked = t.early+1, t.unacked-1
		t.visibleNow(a, 0)
	}
}

func (t *Tracker) visibleNow(a *ack, d time.Duration) {
	t.visibleEntries, t.visibleRows, t.visibleBytes = t.visibleEntries+1, t.visibleRows+a.rows, t.visibleBytes+a.bytes
	t.fresh = append(t.fresh, d)
	t.recent = append(t.recent, d)
}

// Observed records that a table version carrying watermarks was observed
// at at: every position at or below its shard's watermark not seen before
// becomes visible now. It returns how many entries did.
func (t *Tracker) Observed(watermarks map[int]uint64, at time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for s, w := range watermarks {
		st := t.shard(s)
		for p := st.visible + 1; p <= w; p++ {
			if p > uint64(len(st.acks)) || !st.acks[p-1].seen {
				t.unacked++
				continue
			}
			a := &st.acks[p-1]
			t.visibleNow(a, max(at.Sub(a.at), 0))
			n++
		}
		st.visible = max(st.visible, w)
	}
	return n
}

// AllVisible reports whether every ACKed entry is visible.
func (t *Tracker) AllVisible() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.visibleEntries == t.ackedEntries
}

// Sample is one point of the run's series, taken every second.
type Sample struct {
	// Second is the time since the run's start.
	Second float64 `json:"t_s"`
	// Cumulative ACKed and visible (published) entries and bytes.
	AckedEntries     int64 `json:"acked_entries"`
	AckedBytes       int64 `json:"acked_bytes"`
	PublishedEntries int64 `json:"published_entries"`
	PublishedBytes   int64 `json:"published_bytes"`
	// Backlog is what is ACKed and not yet visible.
	BacklogEntries int64   `json:"backlog_entries"`
	BacklogBytes   int64   `json:"backlog_bytes"`
	BacklogMiB     float64 `json:"backlog_mib"`
	// OldestUnpublishedS is the age of the oldest ACKed entry not yet
	// visible (0 when none).
	OldestUnpublishedS float64 `json:"oldest_unpublished_s"`
	// Visible is how many entries became visible since the previous
	// sample; Freshness their freshness (zero when none).
	Visible   int64       `json:"became_visible"`
	Freshness Percentiles `json:"freshness"`
}

// Percentiles of freshness, in seconds.
type Percentiles struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_s"`
	P99   float64 `json:"p99_s"`
	Max   float64 `json:"max_s"`
}

// Summarize returns the percentiles of ds (sorted in place).
func Summarize(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	return Percentiles{Count: int64(len(ds)), P50: walbench.Percentile(ds, 0.50).Seconds(),
		P99: walbench.Percentile(ds, 0.99).Seconds(), Max: ds[len(ds)-1].Seconds()}
}

// Sample takes the series' point at now.
func (t *Tracker) Sample(now time.Time) Sample {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Sample{Second: now.Sub(t.start).Seconds(), AckedEntries: t.ackedEntries, AckedBytes: t.ackedBytes,
		PublishedEntries: t.visibleEntries, PublishedBytes: t.visibleBytes,
		BacklogEntries: t.ackedEntries - t.visibleEntries, BacklogBytes: t.ackedBytes - t.visibleBytes,
		Visible: int64(len(t.recent)), Freshness: Summarize(t.recent)}
	s.BacklogMiB = float64(s.BacklogBytes) / (1 << 20)
	t.recent = t.recent[:0]
	var oldest time.Time
	for _, st := range t.shards {
		// Entries at or below the watermark are visible; the first ACKed
		// one above it is the shard's oldest unpublished.
		st.oldest = max(st.oldest, st.visible+1)
		for p := st.oldest; p <= uint64(len(st.acks)); p++ {
			if a := st.acks[p-1]; a.seen {
				if oldest.IsZero() || a.at.Before(oldest) {
					oldest = a.at
				}
				break
			}
		}
	}
	if !oldest.IsZero() {
		s.OldestUnpublishedS = max(now.Sub(oldest), 0).Seconds()
	}
	return s
}

// Totals are the tracker's counts.
type Totals struct {
	AckedEntries, AckedRows, AckedBytes       int64
	VisibleEntries, VisibleRows, VisibleBytes int64
	// Early entries were shown before their ACK was recorded (freshness
	// 0); Unacked positions were shown that no ACK named.
	Early, Unacked int64
	// Freshness covers every ACKed entry: a visible one with its
	// freshness, one not visible yet (Censored counts them) with its age,
	// a lower bound of the freshness it will have.
	Freshness Percentiles
	Censored  int64
}

// Totals returns the counts and the freshness percentiles at now.
func (t *Tracker) Totals(now time.Time) Totals {
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh := slices.Clone(t.fresh)
	var censored int64
	for _, st := range t.shards {
		for p := st.visible + 1; p <= uint64(len(st.acks)); p++ {
			if a := st.acks[p-1]; a.seen {
				fresh = append(fresh, max(now.Sub(a.at), 0))
				censored++
			}
		}
	}
	return Totals{AckedEntries: t.ackedEntries, AckedRows: t.ackedRows, AckedBytes: t.ackedBytes,
		VisibleEntries: t.visibleEntries, VisibleRows: t.visibleRows, VisibleBytes: t.visibleBytes,
		Early: t.early, Unacked: t.unacked, Freshness: Summarize(fresh), Censored: censored}
}
