package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Record kinds and the schema version of the records walctl keeps in a
// table's _walctl directory. A record of another kind or a newer version
// fails closed.
const (
	KindPlan     = "walctl.plan"
	KindPrepared = "walctl.prepared"
	recordSchema = 1
)

// ErrWatermarkBehindTrim is returned when the table's latest watermark is
// below the position the WAL has trimmed through: a version was lost or
// restored, and the entries in between are gone (rule 9).
var ErrWatermarkBehindTrim = fmt.Errorf("table watermark is behind the WAL's trimmed position: %w", errs.ErrCorrupt)

// ErrWatermarkAheadOfWAL is returned when the table's latest watermark is
// beyond the WAL's last position: the WAL lost entries it had ACKed, re-issued
// positions, or was restored from an older backup. Planning from there would
// skip (or publish twice) whatever the WAL now holds at those positions.
var ErrWatermarkAheadOfWAL = fmt.Errorf("table watermark is beyond the WAL's last position: %w", errs.ErrCorrupt)

// checkPositions is rule 9 and its mirror for one shard: trimmed-through ≤
// watermark ≤ last WAL position, or a loud integrity error naming both.
func checkPositions(table string, shard int, watermark, trimmed, last uint64) error {
	if trimmed > watermark {
		return fmt.Errorf("table %s shard %d: latest watermark %d is below the WAL's trimmed-through position %d (a version was lost or restored); refusing to plan from the first surviving entry: %w",
			table, shard, watermark, trimmed, ErrWatermarkBehindTrim)
	}
	if watermark > last {
		return fmt.Errorf("table %s shard %d: latest watermark %d is beyond the WAL's last position %d (the WAL lost ACKed entries or was restored from an older backup); refusing to plan, entries at positions the table already covers would be skipped: %w",
			table, shard, watermark, last, ErrWatermarkAheadOfWAL)
	}
	return nil
}

// Range is a run of WAL positions [From, To] of one shard.
type Range struct {
	Shard int    `json:"shard"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Bytes int64  `json:"bytes"`
}

// Plan is the immutable description of one publication (DESIGN.md §2). It is
// keyed by its table and start watermarks and pinned create-if-absent.
type Plan struct {
	Kind          string     `json:"kind"`
	SchemaVersion int        `json:"schema_version"`
	ID            string     `json:"id"`
	Table         string     `json:"table"`
	Start         Watermarks `json:"start"`
	// Ranges has one entry per shard with work, each made of whole sealed
	// generations.
	Ranges []Range `json:"ranges"`
	// Files partitions the ranges into output files; every WAL entry goes
	// whole into exactly one file.
	Files []Range `json:"files"`
	// PlannedOnVersion is the Lance version planned on (informational only).
	PlannedOnVersion uint64    `json:"planned_on_version"`
	CreatedBy        string    `json:"created_by"`
	CreatedAt        time.Time `json:"created_at"`

	src recordSource // the pinned record it was read from
}

// Key is the plan's pinning key: a digest of the table and start watermarks.
func (p *Plan) Key() string { return planKey(p.Table, p.Start) }

// End returns the watermarks after the plan is published.
func (p *Plan) End() Watermarks {
	w := p.Start.Clone()
	for _, r := range p.Ranges {
		w[r.Shard] = r.To
	}
	return w
}

// Bytes is the WAL bytes the plan covers.
func (p *Plan) Bytes() int64 {
	var n int64
	for _, r := range p.Ranges {
		n += r.Bytes
	}
	return n
}

func planKey(table string, start Watermarks) string {
	var b strings.Builder
	b.WriteString(table)
	for _, s := range slices.Sorted(maps.Keys(start)) {
		if start[s] == 0 {
			continue // absent and 0 are the same watermark
		}
		fmt.Fprintf(&b, "|%d=%d", s, start[s])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:12])
}

// Status is a plan's standing against a table version (rule 5).
type Status int

// Plan standings.
const (
	// StandingPublishable: every shard's watermark equals the plan's start.
	StandingPublishable Status = iota
	// StandingPublished: every shard's watermark is at or beyond the plan's end.
	StandingPublished
	// StandingSuperseded: neither; the plan must be retired and planning redone.
	StandingSuperseded
)

func (s Status) String() string {
	return [...]string{"publishable", "published", "superseded"}[s]
}

// Standing compares the plan with a version's watermarks.
func (p *Plan) Standing(w Watermarks) Status {
	start, done := true, true
	for _, r := range p.Ranges {
		if w[r.Shard] != r.From-1 {
			start = false
		}
		if w[r.Shard] < r.To {
			done = false
		}
	}
	switch {
	case start:
		return StandingPublishable
	case done:
		return StandingPublished
	}
	return StandingSuperseded
}

// Limits bound one plan.
type Limits struct {
	MaxBytes       int64 // WAL bytes per plan
	MaxGenerations int   // sealed generations per plan
	FileBytes      int64 // target bytes per output file
}

// Pending is the sealed work of one shard above its watermark.
type Pending struct {
	Shard          int
	Watermark      uint64
	TrimmedThrough uint64
	LastPosition   uint64           // the WAL's last durable position
	Generations    []wal.Generation // sealed, oldest first
}

// BuildPlan chooses the next publication from each shard's sealed
// generations above its watermark, within lim. Shards take turns, one
// generation at a time, so none starves; each shard's range stays
// contiguous. It fails with ErrWatermarkBehindTrim when a shard's watermark
// is below what the WAL trimmed, with ErrWatermarkAheadOfWAL when it is
// beyond the WAL's last position, and returns nil when nothing is pending.
func BuildPlan(table string, start Watermarks, pending []Pending, lim Limits) (*Plan, error) {
	queues, err := planQueues(table, pending)
	if err != nil {
		return nil, err
	}
	pl := &planner{lim: lim, ranges: map[int]*Range{}, files: map[int][]Range{}}
	for progress := true; progress; {
		progress = false
		for _, q := range queues {
			if len(q.gens) > 0 && pl.gens < lim.MaxGenerations {
				progress = pl.take(q) || progress
			}
		}
	}
	if len(pl.ranges) == 0 {
		if len(pl.damaged) > 0 {
			// Only damaged work is left: fail loudly, naming it.
			return nil, fmt.Errorf("table %q: the WAL cannot serve %s: walctl doctor says what to decide (quarantine, or restore from a copy): %w",
				table, strings.Join(pl.damaged, ", "), errs.ErrCorrupt)
		}
		return nil, nil
	}
	return pl.plan(table, start), nil
}

// planQueue is one shard's sealed generations above its watermark.
type planQueue struct {
	shard int
	next  uint64 // next position to publish
	gens  []wal.Generation
}

// planQueues checks each shard's positions and queues its pending sealed
// generations; shards with none are left out.
func planQueues(table string, pending []Pending) ([]*planQueue, error) {
	var queues []*planQueue
	for _, p := range pending {
		if err := checkPositions(table, p.Shard, p.Watermark, p.TrimmedThrough, p.LastPosition); err != nil {
			return nil, err
		}
		q := &planQueue{shard: p.Shard, next: p.Watermark + 1}
		for _, g := range p.Generations {
			if g.Sealed && g.Last > p.Watermark {
				q.gens = append(q.gens, g)
			}
		}
		if len(q.gens) > 0 {
			queues = append(queues, q)
		}
	}
	return queues, nil
}

// planner accumulates a plan within its limits, one generation at a time.
type planner struct {
	lim     Limits
	ranges  map[int]*Range
	files   map[int][]Range
	bytes   int64
	gens    int
	damaged []string
}

// take adds q's next generation to the plan, or stops q's shard (a gap,
// damage, or the byte limit); it reports whether it added one.
func (pl *planner) take(q *planQueue) bool {
	g := q.gens[0]
	if g.First > q.next {
		q.gens = nil // a gap (should not happen): stop this shard here
		return false
	}
	if g.Damaged {
		// Damage stops its own shard, never skipped (rule 18); the
		// other shards are still planned.
		pl.damaged = append(pl.damaged, fmt.Sprintf("shard %d positions %d..%d (%s)", q.shard, max(g.First, q.next), g.Last, g.Path))
		q.gens = nil
		return false
	}
	// A generation straddling the watermark contributes its tail only.
	share := g.Bytes
	if g.First < q.next && g.Last > g.First {
		share = g.Bytes * int64(g.Last-q.next+1) / int64(g.Last-g.First+1)
	}
	if pl.gens > 0 && pl.bytes+share > pl.lim.MaxBytes {
		q.gens = nil
		return false
	}
	r := pl.ranges[q.shard]
	if r == nil {
		r = &Range{Shard: q.shard, From: q.next}
		pl.ranges[q.shard] = r
	}
	r.To, r.Bytes = g.Last, r.Bytes+share
	fs := pl.files[q.shard]
	if n := len(fs); n > 0 && fs[n-1].Bytes+share <= pl.lim.FileBytes {
		fs[n-1].To, fs[n-1].Bytes = g.Last, fs[n-1].Bytes+share
	} else {
		fs = append(fs, Range{Shard: q.shard, From: q.next, To: g.Last, Bytes: share})
	}
	pl.files[q.shard] = fs
	pl.bytes += share
	pl.gens++
	q.next = g.Last + 1
	q.gens = q.gens[1:]
	return true
}

// plan returns the accumulated ranges and files as a plan starting from
// start, shards in order.
func (pl *planner) plan(table string, start Watermarks) *Plan {
	p := &Plan{Kind: KindPlan, SchemaVersion: recordSchema, Table: table, Start: Watermarks{}}
	for _, s := range slices.Sorted(maps.Keys(pl.ranges)) {
		p.Ranges = append(p.Ranges, *pl.ranges[s])
		p.Files = append(p.Files, pl.files[s]...)
	}
	for s, w := range start {
		if w > 0 {
			p.Start[s] = w
		}
	}
	for _, r := range p.Ranges {
		p.Start[r.Shard] = r.From - 1
	}
	return p
}

// planID makes the id of a pinned plan: its key and a suffix unique to the
// pin, so a plan pinned again after a retirement is told apart.
func planID(key string, now time.Time) string {
	return key + "-" + strconv.FormatInt(now.UnixNano(), 36)
}
