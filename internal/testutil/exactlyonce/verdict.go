package exactlyonce

import (
	"cmp"
	"fmt"
	"slices"
)

// Verdict is a table's ids judged against a ledger.
type Verdict struct {
	Report
	// UncertainSeen counts ids of appends of unknown outcome found in the
	// table: allowed, once each and only whole batches.
	UncertainSeen int
	// Refused are ids of appends refused outright that are in the table;
	// Invented ids that were never appended at all.
	Refused, Invented []int64
	// HalfVisible names appends of unknown outcome partly in the table.
	HalfVisible []string
}

// Judge compares a table's ids with the ledger: every ACKed id exactly
// once, an append of unknown outcome whole or not at all, a refused append
// never, nothing else.
func (l *Ledger) Judge(ids []int64) Verdict {
	v := Verdict{Report: Check(ids, l.Acked.Snapshot())}
	uncertain, refused := newRangeSet(l.Uncertains()), newRangeSet(l.Refused())
	for _, id := range v.Unacked {
		switch {
		case uncertain.has(id):
			v.UncertainSeen++
		case refused.has(id):
			v.Refused = append(v.Refused, id)
		default:
			v.Invented = append(v.Invented, id)
		}
	}
	v.HalfVisible = HalfVisible(uncertain.rs, Count(ids))
	return v
}

// Problems lists the verdict's violations (none: exactly once).
func (v Verdict) Problems() []string {
	var out []string
	if len(v.Missing) > 0 || len(v.Duplicated) > 0 {
		out = append(out, v.Report.Err().Error())
	}
	if len(v.Refused) > 0 {
		out = append(out, fmt.Sprintf("%d ids of appends the WAL refused (not of unknown outcome) are in the table, first %d", len(v.Refused), v.Refused[0]))
	}
	if len(v.Invented) > 0 {
		out = append(out, fmt.Sprintf("%d ids that were never appended are in the table, first %d", len(v.Invented), v.Invented[0]))
	}
	return append(out, v.HalfVisible...)
}

// HalfVisible names each append of unknown outcome (rs) of which some ids
// but not all are in a table whose ids are counted in count: an entry is
// appended whole or not at all.
func HalfVisible(rs []Range, count map[int64]int) []string {
	var out []string
	for _, r := range rs {
		n := int64(0)
		for id := r.First; id < r.End; id++ {
			if count[id] > 0 {
				n++
			}
		}
		if n != 0 && n != r.Len() {
			out = append(out, fmt.Sprintf("append of unknown outcome %s is half visible: %d of its %d rows are in the table", r, n, r.Len()))
		}
	}
	return out
}

// rangeSet answers whether an id lies in one of a set of ranges.
type rangeSet struct{ rs []Range }

func newRangeSet(rs []Range) rangeSet {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	return rangeSet{rs}
}

func (s rangeSet) has(id int64) bool {
	i, _ := slices.BinarySearchFunc(s.rs, id, func(r Range, id int64) int { return cmp.Compare(r.First, id+1) })
	// rs[i-1] is the last range starting at or before id.
	return i > 0 && id < s.rs[i-1].End
}
