package verify

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/lineage"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
)

// row is one physical row of the audited version.
type row struct {
	h    uint64
	frag int   // index into auditor.frags
	off  int64 // physical row of the fragment
	// dupOf is set on a copy of a retained record beyond the WAL's count.
	dupOf *walPos
}

// fragInfo is one fragment of the version: its id, the walctl file it is
// (nil when walctl did not write it) and the operation that added it.
type fragInfo struct {
	id     uint64
	path   string // its first data file, under data/
	pf     *publish.PreparedFile
	origin string
}

// auditor compares the version's rows with the ACKed records.
type auditor struct {
	*verifier
	frags   []fragInfo
	present map[uint64][]row // live rows, foreign appends excepted
	foreign []row            // live rows of fragments another writer appended
	deleted []row            // rows deletion files remove
	live    map[uint64][]walPos
	want    digest.Digest // of the trimmed positions, every shard
	digests bool          // every trimmed position has a digest
	// otherHash counts the digest records made with another row hash than
	// the table's (by an older walctl during an upgrade): not comparable.
	otherHash int
	// origins maps the content of every row of walctl's data files that
	// the version no longer holds (compacted away) to its WAL position;
	// built on first need (originOf).
	origins map[uint64]walPos
	r       *publish.Reader
	byPath  map[string]publish.PreparedFile
	// comps are walctl's compactions by the path of the file they wrote.
	comps map[string]*publish.Compaction
}

// audit runs the comparison and records its problems and counts.
func (v *verifier) audit(r *publish.Reader, dir objstore.Store, byPath map[string]publish.PreparedFile) error {
	a := &auditor{verifier: v, present: map[uint64][]row{}, live: map[uint64][]walPos{}, digests: true, r: r, byPath: byPath}
	comps, err := publish.NewStoreOn(dir).Compactions(v.ctx)
	if err != nil {
		return err
	}
	a.comps = map[string]*publish.Compaction{}
	for _, c := range comps {
		a.comps[strings.TrimPrefix(c.File.Path, "data/")] = c
	}
	if err := a.scan(r, byPath); err != nil {
		return err
	}
	if err := a.expected(dir); err != nil {
		return err
	}
	rest := a.matchLive()
	accepted := a.matchDigests(rest)
	a.matchForeign(accepted)
	v.rep.ComparedDigest = a.want.Rows
	v.rep.ForeignRows = int64(len(a.foreign))
	return nil
}

// scan hashes every physical row of the version and sorts it: deleted,
// foreign (its fragment was appended by another writer) or present.
func (a *auditor) scan(r *publish.Reader, byPath map[string]publish.PreparedFile) error {
	origins, err := lineage.FragmentOrigins(a.ctx, r.Dataset())
	if err != nil {
		return err
	}
	k := 0
	return r.ScanPhysical(a.ctx, func(rec arrow.RecordBatch) error {
		frag := r.Manifest.Fragments[k]
		k++
		fi := fragInfo{id: frag.ID, origin: origins[frag.ID]}
		if len(frag.Files) > 0 {
			fi.path = frag.Files[0].Path
			if pf, ok := byPath[frag.Files[0].Path]; ok {
				fi.pf = &pf
			}
		}
		a.frags = append(a.frags, fi)
		del, err := r.Dataset().DeletedRows(frag)
		if err != nil {
			return err
		}
		isDel := map[int64]bool{}
		for _, o := range del {
			isDel[int64(o)] = true
		}
		var alive []uint64
		for i, h := range a.hash.Rows(rec) {
			rw := row{h: h, frag: len(a.frags) - 1, off: int64(i)}
			switch {
			case isDel[int64(i)]:
				a.deleted = append(a.deleted, rw)
				a.rep.DeletedRows++
				continue
			case fi.origin == lineage.OpForeignAppend && fi.pf == nil:
				a.foreign = append(a.foreign, rw)
			default:
				a.present[h] = append(a.present[h], rw)
			}
			alive = append(alive, h)
		}
		a.rep.TableRows += int64(len(alive))
		if n := a.abovePending(alive); n > 0 {
			a.rep.AboveWatermark += n
			a.problem(Problem{Kind: KindUnpublished, Shard: -1, Fragment: ptr(int64(frag.ID)), Rows: n,
				Detail: fmt.Sprintf("%d row(s) of fragment %d are WAL records above the watermark", n, frag.ID)})
		}
		return nil
	})
}

// expected gathers, per shard, the digests of the trimmed positions (a
// tiling of 1..trimmed from the recorded digests) and the retained records
// after them up to the watermark.
func (a *auditor) expected(dir objstore.Store) error {
	all, err := publish.NewStoreOn(dir).AllDigests(a.ctx)
	if err != nil {
		return err
	}
	byShard := map[int][]publish.GenerationDigest{}
	for _, d := range all {
		if d.RowHash() != a.hash {
			a.otherHash++
			continue
		}
		for _, g := range d.Generations {
			byShard[g.Shard] = append(byShard[g.Shard], g)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(a.shards)) {
		sr := a.shards[s]
		next := a.tile(s, byShard[s])
		sr.DigestThrough = next - 1
		if to := min(sr.Watermark, sr.LastPosition); next <= to {
			if err := a.retained(s, next, to, a.live); err != nil {
				return err
			}
		}
		a.rep.ComparedWAL += sr.WALRecords
		if sr.TrimmedThrough > sr.Watermark {
			a.problem(Problem{Kind: KindMissing, Shard: s, From: sr.Watermark + 1, To: sr.TrimmedThrough,
				Detail: fmt.Sprintf("the WAL is trimmed through %d, beyond the table's watermark %d: those records are lost", sr.TrimmedThrough, sr.Watermark)})
		}
	}
	return nil
}

// tile adds the digests covering shard s's trimmed positions (up to its
// watermark) to the expected digest and returns the first position after
// them. Positions without a digest are a KindNoDigest problem.
func (a *auditor) tile(s int, gens []publish.GenerationDigest) uint64 {
	sr := a.shards[s]
	through := min(sr.TrimmedThrough, sr.Watermark)
	sort.Slice(gens, func(i, j int) bool {
		return gens[i].From < gens[j].From || gens[i].From == gens[j].From && gens[i].To < gens[j].To
	})
	next := uint64(1)
	for next <= through {
		i := sort.Search(len(gens), func(i int) bool { return gens[i].From >= next })
		if i == len(gens) || gens[i].From != next || gens[i].To > sr.Watermark {
			a.digests = false
			detail := fmt.Sprintf("shard %d positions %d–%d are trimmed and have no recorded digest (published by an older walctl): their records cannot be compared", s, next, through)
			if a.otherHash > 0 {
				detail = fmt.Sprintf("shard %d positions %d–%d are trimmed and have no digest made with the table's row hash %d (%d digest record(s) made with another, by an older walctl during an upgrade, are not comparable): their records cannot be compared",
					s, next, through, a.hash, a.otherHash)
			}
			a.problem(Problem{Kind: KindNoDigest, Shard: s, From: next, To: through, Detail: detail})
			return through + 1
		}
		a.want = a.want.Plus(gens[i].Digest)
		sr.DigestRecords += gens[i].Digest.Rows
		next = gens[i].To + 1
	}
	return next
}

// matchLive pairs every retained record with a present row of equal
// content. Records without one are missing, named by shard and position;
// copies beyond the WAL's count are returned, with the rest of the present
// rows, for the digests.
func (a *auditor) matchLive() []row {
	var missing []walPos
	var rest []row
	for h, want := range a.live {
		have := a.present[h]
		n := min(len(have), len(want))
		missing = append(missing, want[n:]...)
		for _, rw := range have[n:] {
			rw.dupOf = &want[0]
			rest = append(rest, rw)
		}
		delete(a.present, h)
	}
	for _, rows := range a.present {
		rest = append(rest, rows...)
	}
	a.reportMissing(missing)
	return rest
}

// reportMissing reports missing records, consecutive positions together.
func (a *auditor) reportMissing(missing []walPos) {
	sort.Slice(missing, func(i, j int) bool {
		return missing[i].shard < missing[j].shard || missing[i].shard == missing[j].shard && missing[i].pos < missing[j].pos
	})
	for i := 0; i < len(missing); {
		j, rows := i, int64(1)
		for j+1 < len(missing) && missing[j+1].shard == missing[i].shard && missing[j+1].pos <= missing[j].pos+1 {
			j++
			rows++
		}
		p := Problem{Kind: KindMissing, Shard: missing[i].shard, From: missing[i].pos, To: missing[j].pos, Rows: rows,
			Detail: fmt.Sprintf("%d record(s) of shard %d positions %d–%d are not in the table", rows, missing[i].shard, missing[i].pos, missing[j].pos)}
		a.rep.Missing += rows
		a.problem(p)
		i = j + 1
	}
}

// originOf finds the WAL position of a record by its content in walctl's
// data files that the version no longer holds (a compaction rewrote them;
// they stay until `table clean`). It reads those files once, on first
// need; ok is false when none holds the content.
func (a *auditor) originOf(h uint64) (walPos, bool) {
	if a.origins == nil {
		a.origins = map[uint64]walPos{}
		held := map[string]bool{}
		for _, f := range a.r.Manifest.Fragments {
			for _, df := range f.Files {
				held[df.Path] = true
			}
		}
		for path, pf := range a.byPath {
			if held[path] || pf.Lineage == nil {
				continue
			}
			rec, err := a.r.Dataset().ReadFile(a.r.Manifest, pf.Descriptor)
			if err != nil {
				continue // removed by clean, or unreadable: no origin from it
			}
			for i, rh := range a.hash.Rows(rec) {
				if p, ok := pf.Lineage.Position(pf.Range.From, int64(i)); ok {
					a.origins[rh] = walPos{shard: pf.Range.Shard, pos: p}
				}
			}
			rec.Release()
		}
	}
	p, ok := a.origins[h]
	return p, ok
}

// throughCompactions maps row off of data file path (under data/) back
// through walctl's compaction records to the descriptor set of the file
// that was published, and so to a WAL position.
func (a *auditor) throughCompactions(path string, off int64) (walPos, bool) {
	for depth := 0; depth < 64; depth++ {
		if pf, ok := a.byPath[path]; ok && pf.Lineage != nil {
			p, ok := pf.Lineage.Position(pf.Range.From, off)
			return walPos{shard: pf.Range.Shard, pos: p}, ok
		}
		c := a.comps[path]
		if c == nil {
			return walPos{}, false
		}
		found := false
		for _, src := range c.Sources {
			if off < int64(src.Rows) {
				path, found = src.Path, true
				break
			}
			off -= int64(src.Rows)
		}
		if !found {
			return walPos{}, false
		}
	}
	return walPos{}, false
}
