package exactlyonce

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// maxFindings bounds how many violations an audit lists; the rest are
// counted.
const maxFindings = 20

// findings collects violations up to maxFindings.
type findings struct {
	list []string
	more int
}

func (f *findings) add(format string, args ...any) {
	if len(f.list) < maxFindings {
		f.list = append(f.list, fmt.Sprintf(format, args...))
		return
	}
	f.more++
}

func (f *findings) done() []string {
	if f.more > 0 {
		return append(f.list, fmt.Sprintf("… and %d more", f.more))
	}
	return f.list
}

// AuditVersions checks every version of a table (vs, oldest first) against
// the ledger, not only the latest: within each version no id twice, no id
// that was refused or never appended, no append of unknown outcome half
// visible, and the ids of exactly the ACKed positions up to its watermarks
// (an ACKed batch at or below a shard's watermark whole, one above it not
// at all); from each version to the next no id dropped (compaction rewrites
// files, ids stay) and no watermark or epoch going down.
func (l *Ledger) AuditVersions(vs []Version) []string {
	var f findings
	uncertain, refused := newRangeSet(l.Uncertains()), newRangeSet(l.Refused())
	acked := l.Acked.Snapshot()
	acks := l.Acks()
	var prev *Version
	var prevIDs map[int64]int
	for i := range vs {
		v := &vs[i]
		count := Count(v.IDs)
		l.auditIDs(&f, v, count, acked, uncertain, refused)
		auditPositions(&f, v, count, acks)
		if prev != nil {
			auditStep(&f, prev, v, prevIDs, count)
		}
		prev, prevIDs = v, count
	}
	return f.done()
}

// auditIDs checks one version's ids by themselves.
func (l *Ledger) auditIDs(f *findings, v *Version, count map[int64]int, acked map[int64]bool, uncertain, refused rangeSet) {
	for _, id := range sortedKeys(count) {
		switch n := count[id]; {
		case n > 1:
			f.add("version %d: id %d appears %d times", v.Number, id, n)
		case acked[id] || uncertain.has(id):
		case refused.has(id):
			f.add("version %d: id %d is of an append the WAL refused", v.Number, id)
		default:
			f.add("version %d: id %d was never appended", v.Number, id)
		}
	}
	for _, p := range HalfVisible(uncertain.rs, count) {
		f.add("version %d: %s", v.Number, p)
	}
}

// auditPositions checks that a version holds an ACKed batch iff its
// position is at or below the version's watermark of its shard.
func auditPositions(f *findings, v *Version, count map[int64]int, acks []Ack) {
	for _, a := range acks {
		n := int64(0)
		for id := a.IDs.First; id < a.IDs.End; id++ {
			if count[id] > 0 {
				n++
			}
		}
		wm := v.Watermarks[a.Shard]
		switch {
		case a.Pos <= wm && n != a.IDs.Len():
			f.add("version %d: shard %d position %d (ACKed with ids %s) is at or below the watermark %d, but %d of its %d ids are in the version",
				v.Number, a.Shard, a.Pos, a.IDs, wm, n, a.IDs.Len())
		case a.Pos > wm && n != 0:
			f.add("version %d: shard %d position %d (ACKed with ids %s) is above the watermark %d, but %d of its ids are in the version",
				v.Number, a.Shard, a.Pos, a.IDs, wm, n)
		}
	}
}

// auditStep checks what may not change from version prev to the next, v.
func auditStep(f *findings, prev, v *Version, prevIDs, count map[int64]int) {
	for _, id := range sortedKeys(prevIDs) {
		if count[id] == 0 {
			f.add("version %d dropped id %d that version %d held", v.Number, id, prev.Number)
			break
		}
	}
	for _, s := range sortedKeys(prev.Watermarks) {
		if v.Watermarks[s] < prev.Watermarks[s] {
			f.add("version %d: shard %d watermark %d, below version %d's %d", v.Number, s, v.Watermarks[s], prev.Number, prev.Watermarks[s])
		}
	}
	if v.Epoch < prev.Epoch {
		f.add("version %d has epoch %d, below version %d's %d", v.Number, v.Epoch, prev.Number, prev.Epoch)
	}
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
