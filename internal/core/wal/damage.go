package wal

import (
	"fmt"
	"math"
	"sort"
)

// DamageReport describes WAL data that failed an integrity check at open, or
// a generation an operator quarantined (DESIGN.md §3 rule 18). The shard it
// is in refuses the operations that need the positions First..Last (reads
// reaching them, trims through them, and appends when Last is unknown);
// other shards and tables are unaffected. Nothing is repaired or skipped.
type DamageReport struct {
	Table string `json:"table"`
	// Shard is the shard, or -1 when the table's registration itself is
	// damaged (the whole table is then unavailable).
	Shard int `json:"shard"`
	// Generation is the ID (first position) of the damaged generation; 0
	// when the damage is not in a generation (a missing range, a counter).
	Generation uint64 `json:"generation"`
	// First and Last bound the positions the shard cannot serve. Last is 0
	// when unknown: the damage reaches the shard's end, so its next position
	// is unknown and appends are refused too.
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// File, Offset and Position locate the first failure found: the file,
	// the byte in it and the WAL position concerned.
	File     string `json:"file"`
	Offset   int64  `json:"offset"`
	Position uint64 `json:"position"`
	Detail   string `json:"detail"`
	// Quarantined is the directory the generation's files were moved to by
	// Quarantine; empty while the damage is in place.
	Quarantined string `json:"quarantined,omitempty"`
}

// String is one line naming what an operator needs.
func (d DamageReport) String() string {
	rng := fmt.Sprintf("positions %d..%d", d.First, d.Last)
	if d.Last == 0 {
		rng = fmt.Sprintf("positions from %d", d.First)
	}
	if d.Quarantined != "" {
		return fmt.Sprintf("table %s shard %d generation %d quarantined to %s: %s unreadable", d.Table, d.Shard, d.Generation, d.Quarantined, rng)
	}
	return fmt.Sprintf("table %s shard %d: %s: byte %d (position %d): %s; %s unreadable", d.Table, d.Shard, d.File, d.Offset, d.Position, d.Detail, rng)
}

// err is the error operations touching the report's positions fail with.
func (d DamageReport) err() error {
	return fmt.Errorf("%s: %w", d, ErrCorruptEntry)
}

// hole is a range of positions a shard cannot serve. bound is the highest
// position it may cover when rep.Last is unknown.
type hole struct {
	rep   DamageReport
	bound uint64
}

// generation describes the hole in listings: sealed, so that planning
// reaches it, and Damaged.
func (h hole) generation() Generation {
	last := h.rep.Last
	if last == 0 {
		last = max(h.bound, h.rep.First)
	}
	return Generation{ID: h.rep.Generation, First: h.rep.First, Last: last, Entries: int(last - h.rep.First + 1),
		Sealed: true, Path: h.rep.File, Damaged: true}
}

func (h hole) end() uint64 {
	if h.rep.Last == 0 {
		return math.MaxUint64
	}
	return h.rep.Last
}

// newHole records damage found in the shard's generation gen (0: not in a
// generation) covering first..last (last 0: unknown).
func (s *shard) newHole(ce *corruptError, gen, first, last uint64) hole {
	return hole{rep: DamageReport{Table: s.t.name, Shard: s.id, Generation: gen, First: first, Last: last,
		File: ce.File, Offset: ce.Offset, Position: ce.Position, Detail: ce.Detail}}
}

// addHole records a hole found at open and logs it at error level.
func (s *shard) addHole(h hole) {
	if h.rep.Last == 0 {
		s.frozen = h.rep.err()
		h.bound = h.rep.First
		if h.rep.Generation != 0 {
			h.bound = s.positionBound(h.rep.Generation)
		}
	}
	if h.rep.Quarantined == "" {
		s.e.opts.Logger.Error("wal: damaged data: the shard refuses the positions it holds until an operator quarantines it",
			"table", s.t.name, "shard", s.id, "file", h.rep.File, "byte", h.rep.Offset, "position", h.rep.Position,
			"first", h.rep.First, "last", h.rep.Last, "detail", h.rep.Detail)
	}
	s.holes = append(s.holes, h)
	sort.Slice(s.holes, func(i, j int) bool { return s.holes[i].rep.First < s.holes[j].rep.First })
}

// holeIn returns the first hole overlapping from..to, under s.mu.
func (s *shard) holeIn(from, to uint64) *hole {
	for i := range s.holes {
		if h := &s.holes[i]; h.rep.First <= to && from <= h.end() {
			return h
		}
	}
	return nil
}

// damage returns the shard's reports, under s.mu.
func (s *shard) damage() []DamageReport {
	var out []DamageReport
	for _, h := range s.holes {
		out = append(out, h.rep)
	}
	return out
}

// Damage lists every damaged or quarantined range the engine knows, by
// table and shard: what recovery found at Open (a sealed generation that
// fails its checks, acknowledged entries of an open generation that do not,
// missing generations, unreadable counters or registrations) and what
// Quarantine moved aside. Damage found later by a read is returned by that
// read and listed here after the next Open.
func (e *Engine) Damage() []DamageReport {
	e.mu.Lock()
	ts := make([]*table, 0, len(e.tables))
	for _, t := range e.tables {
		ts = append(ts, t)
	}
	out := append([]DamageReport(nil), e.badTables...)
	e.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	for _, t := range ts {
		for _, s := range t.shards {
			s.mu.Lock()
			out = append(out, s.damage()...)
			s.mu.Unlock()
		}
	}
	return out
}
