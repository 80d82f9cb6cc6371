package exactlyonce

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// History remembers what each version of a table held when it was last
// seen, so that a later look (after a power cut, at the end of a run) can
// tell whether a version number disappeared or came back with other
// content: a version number is created once, ever (DESIGN.md rule 23).
// Only `walctl table clean` removes versions, and only the oldest ones
// (committed before its cutoff, never the latest).
type History struct {
	seen map[uint64]digest
}

type digest [sha256.Size]byte

// NewHistory returns a history that has seen nothing.
func NewHistory() *History { return &History{seen: map[uint64]digest{}} }

// Observe checks the versions present now (vs, oldest first) against each
// other and against what was seen before, and remembers them. cleaned tells
// whether `table clean` may have run since the table was created: only then
// may the oldest versions be gone, as a prefix.
func (h *History) Observe(vs []Version, cleaned bool) []string {
	var f findings
	present := map[uint64]bool{}
	for i, v := range vs {
		present[v.Number] = true
		if i > 0 && v.Number != vs[i-1].Number+1 {
			f.add("versions %d to %d are missing between %d and %d: only `table clean` removes versions, and only the oldest",
				vs[i-1].Number+1, v.Number-1, vs[i-1].Number, v.Number)
		}
	}
	oldest := uint64(0)
	if len(vs) > 0 {
		oldest = vs[0].Number
		if oldest > 1 && !cleaned {
			f.add("versions 1 to %d are gone, and no `table clean` ran", oldest-1)
		}
	}
	for _, n := range sortedKeys(h.seen) {
		if !present[n] && (n >= oldest || !cleaned) {
			f.add("version %d, seen before, is gone (oldest now %d, latest %d)", n, oldest, latest(vs))
		}
	}
	for _, v := range vs {
		d := v.digest()
		if old, ok := h.seen[v.Number]; ok && old != d {
			f.add("version %d changed content since it was last seen (now %d rows, watermarks %v, epoch %d)", v.Number, len(v.IDs), v.Watermarks, v.Epoch)
		}
		h.seen[v.Number] = d
	}
	return f.done()
}

func latest(vs []Version) uint64 {
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1].Number
}

// digest sums what a version holds: its ids (as a multiset), watermarks,
// epoch and plan.
func (v Version) digest() digest {
	h := sha256.New()
	ids := slices.Clone(v.IDs)
	slices.Sort(ids)
	var b [8]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	for _, s := range sortedKeys(v.Watermarks) {
		fmt.Fprintf(h, "|wm %d=%d", s, v.Watermarks[s])
	}
	fmt.Fprintf(h, "|epoch %d|plan %s", v.Epoch, v.Plan)
	var d digest
	h.Sum(d[:0])
	return d
}
