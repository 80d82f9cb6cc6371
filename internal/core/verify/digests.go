package verify

import (
	"fmt"

	"github.com/walctl/walctl/internal/core/digest"
)

// explanation is one way the rows left after the WAL comparison can equal
// the digests of the trimmed positions: with the copies of retained
// records, the repeated copies, or the deleted rows taken as what differs.
type explanation struct{ liveDups, copies, gone bool }

// explanations are tried in order, the simplest first.
var explanations = []explanation{
	{}, {liveDups: true}, {copies: true}, {gone: true}, {liveDups: true, copies: true},
	{liveDups: true, gone: true}, {copies: true, gone: true}, {liveDups: true, copies: true, gone: true},
}

func sum(rows []row) digest.Digest {
	var d digest.Digest
	for _, rw := range rows {
		d.AddHash(rw.h)
	}
	return d
}

// matchDigests compares the rows the WAL comparison left with the digests
// of the trimmed positions. When they differ it looks for the simplest
// explanation: copies of records (duplicates) and deleted rows (missing
// records, named by shard and position when a walctl file held them). It
// returns the rows accepted as trimmed records, by hash.
func (a *auditor) matchDigests(rest []row) map[uint64]row {
	accepted := map[uint64]row{}
	if !a.digests {
		return accepted // reported as KindNoDigest: nothing to compare with
	}
	var liveDups, copies, base, gone []row
	for _, rw := range rest {
		_, seen := accepted[rw.h]
		switch {
		case rw.dupOf != nil:
			liveDups = append(liveDups, rw)
		case seen:
			copies = append(copies, rw)
		default:
			accepted[rw.h] = rw
			base = append(base, rw)
		}
	}
	for _, rw := range a.deleted {
		if _, ok := a.live[rw.h]; !ok {
			gone = append(gone, rw)
		}
	}
	dBase, dLive, dCopies, dGone := sum(base), sum(liveDups), sum(copies), sum(gone)
	for _, e := range explanations {
		got := dBase
		if !e.liveDups {
			got = got.Plus(dLive)
		}
		if !e.copies {
			got = got.Plus(dCopies)
		}
		if e.gone {
			got = got.Plus(dGone)
		}
		if got == a.want {
			a.explain(e, liveDups, copies, gone, accepted)
			return accepted
		}
	}
	a.unexplained(rest, dBase.Plus(dLive).Plus(dCopies))
	return accepted
}

// explain reports what explanation e takes as differences.
func (a *auditor) explain(e explanation, liveDups, copies, gone []row, accepted map[uint64]row) {
	if e.liveDups {
		for _, rw := range liveDups {
			a.duplicate(rw, rw.dupOf.shard, rw.dupOf.pos, true)
		}
	}
	if e.copies {
		for _, rw := range copies {
			s, p, ok := a.position(accepted[rw.h])
			if !ok {
				s, p, ok = a.position(rw)
			}
			a.duplicate(rw, s, p, ok)
		}
	}
	if !e.gone {
		return
	}
	for _, rw := range gone {
		fi := a.frags[rw.frag]
		p := Problem{Kind: KindMissing, Shard: -1, Fragment: ptr(int64(fi.id)), Row: ptr(rw.off), Rows: 1}
		if s, pos, ok := a.position(rw); ok {
			p.Shard, p.From, p.To = s, pos, pos
			p.Detail = fmt.Sprintf("the record of shard %d position %d (fragment %d row %d) is deleted from the table", s, pos, fi.id, rw.off)
		} else {
			p.Detail = fmt.Sprintf("an ACKed record (by digest) is deleted from the table: fragment %d row %d; no walctl file left says its position", fi.id, rw.off)
		}
		a.rep.Missing++
		a.problem(p)
	}
}

// duplicate reports rw as a second copy of the record at shard s position
// pos (known says whether the position is known).
func (a *auditor) duplicate(rw row, s int, pos uint64, known bool) {
	fi := a.frags[rw.frag]
	p := Problem{Kind: KindDuplicated, Shard: -1, Fragment: ptr(int64(fi.id)), Row: ptr(rw.off), Rows: 1}
	if known {
		p.Shard, p.From, p.To = s, pos, pos
		p.Detail = fmt.Sprintf("fragment %d row %d repeats the record of shard %d position %d", fi.id, rw.off, s, pos)
	} else {
		p.Detail = fmt.Sprintf("fragment %d row %d repeats an ACKed record (by digest) whose position no walctl file still says", fi.id, rw.off)
	}
	a.rep.Duplicated++
	a.problem(p)
}

// unexplained reports rows that no explanation reconciles with the digests.
func (a *auditor) unexplained(rest []row, got digest.Digest) {
	delta := got.Minus(a.want)
	p := Problem{Kind: KindUnexpected, Shard: -1, Rows: delta.Rows,
		Detail: fmt.Sprintf("the %d table rows not compared with the WAL do not match the digests of the trimmed positions (%d records): %+d rows, content differs",
			got.Rows, a.want.Rows, delta.Rows)}
	if delta.Rows == 1 {
		for _, rw := range rest {
			if rw.h == delta.Sum {
				fi := a.frags[rw.frag]
				p.Fragment, p.Row = ptr(int64(fi.id)), ptr(rw.off)
				p.Detail = fmt.Sprintf("fragment %d row %d is no ACKed record: the other rows match the digests of the trimmed positions", fi.id, rw.off)
			}
		}
	}
	a.rep.Unexpected += max(1, delta.Rows, -delta.Rows)
	a.problem(p)
}

// matchForeign reports the rows another writer appended that equal an
// ACKed record (retained, or accepted by digest) as duplicates; the others
// are foreign rows, counted.
func (a *auditor) matchForeign(accepted map[uint64]row) {
	for _, rw := range a.foreign {
		if want, ok := a.live[rw.h]; ok {
			a.duplicate(rw, want[0].shard, want[0].pos, true)
			continue
		}
		if orig, ok := accepted[rw.h]; ok {
			s, p, known := a.position(orig)
			a.duplicate(rw, s, p, known)
		}
	}
}

// position maps a row to the WAL shard and position of its record: by the
// walctl file that holds it, or else by its content in the walctl files a
// compaction rewrote.
func (a *auditor) position(rw row) (int, uint64, bool) {
	fi := a.frags[rw.frag]
	if fi.pf != nil && fi.pf.Lineage != nil {
		if p, ok := fi.pf.Lineage.Position(fi.pf.Range.From, rw.off); ok {
			return fi.pf.Range.Shard, p, true
		}
	}
	if fi.path != "" {
		if o, ok := a.throughCompactions(fi.path, rw.off); ok {
			return o.shard, o.pos, true
		}
	}
	if o, ok := a.originOf(rw.h); ok {
		return o.shard, o.pos, true
	}
	return -1, 0, false
}
