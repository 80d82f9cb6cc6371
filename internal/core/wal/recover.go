package wal

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/walctl/walctl/internal/core/durable"
)

// loadShard recovers one shard (doc.go, Recovery). Damage is contained: an
// integrity failure in one generation becomes a hole (damage.go) and the
// shard keeps serving what lies before it, and after it when later
// generations are intact; a failure that leaves the shard's state unknown
// (an unreadable counter or directory, a stray file, a failed sync) freezes
// the whole shard. Nothing is served before it is durable (DESIGN.md §3
// rule 22): the open generation and the shard directory are synced before
// the shard's positions count as acknowledged. Other shards and tables are
// unaffected.
func (e *Engine) loadShard(t *table, id int) *shard {
	s := &shard{e: e, t: t, id: id, dir: filepath.Join(t.dir, shardDirName(id))}
	s.cond = sync.NewCond(&s.mu)
	err := e.recoverShard(s)
	if err == nil {
		err = s.syncRecovered()
	}
	if err != nil {
		err = s.wrapSyncFailure(err)
		for _, g := range s.gens {
			g.closeFiles()
		}
		s.gens = nil
		ce := &corruptError{}
		if !errors.As(err, &ce) {
			ce = corruptAt(s.dir, 0, s.trimmed+1, "recovery failed: %v", err)
		}
		s.addHole(s.newHole(ce, 0, s.trimmed+1, 0))
		s.next = s.trimmed + 1
	}
	s.synced = s.next - 1
	s.written = s.synced
	return s
}

// syncRecovered makes durable what recovery found and will serve: the open
// generation's files (a killed process leaves its last entries in the page
// cache only) and the shard directory (names created, renamed or removed
// by the process before, or by recovery).
func (s *shard) syncRecovered() error {
	if g := s.open(); g != nil {
		if err := syncAll([]*os.File{g.data, g.idx}, s.dir); err != nil {
			return err
		}
		g.durable = g.size
		return nil
	}
	return durable.SyncDir(s.dir)
}

func (e *Engine) recoverShard(s *shard) error {
	var err error
	if s.trimmed, err = readUint(s.dir, trimmedFileName); err != nil {
		return err
	}
	s.next = s.trimmed + 1
	if err := s.checkSyncFailure(); err != nil {
		return err
	}
	quarantined, err := e.readQuarantine(s.t.name, s.id)
	if err != nil {
		return err
	}
	order, kept, err := e.listGens(s.dir)
	if err != nil {
		return err
	}
	if err := s.loadRecycled(kept); err != nil {
		return err
	}
	laterAcked := ackEvidence(s.dir, order)
	for i := range order {
		step, err := e.recoverGen(s, order, i, quarantined, laterAcked[i+1])
		if err != nil {
			return err
		}
		if step == genDone {
			return nil
		}
		if step == genStop {
			break
		}
	}
	// Positions of quarantined generations are never issued again, even
	// when the last generation was quarantined.
	for _, h := range quarantined {
		if h.rep.Last >= s.next {
			s.holes = append(s.holes, h)
			s.next = h.rep.Last + 1
		}
	}
	if g := s.open(); g != nil {
		return g.reopen()
	}
	return nil
}

// genStep says how recoverShard goes on after one generation.
type genStep int

const (
	genNext genStep = iota // on to the next generation
	genStop                // no later generation is served
	genDone                // the shard is recovered as it stands (no reopen)
)

// recoverGen recovers generation order[i]; laterAcked is the highest
// position later generations prove acknowledged (see ackEvidence).
func (e *Engine) recoverGen(s *shard, order []uint64, i int, quarantined []hole, laterAcked uint64) (genStep, error) {
	first := order[i]
	base := filepath.Join(s.dir, genName(first))
	if first <= s.trimmed {
		// Trimmed, but the crash came before the files were deleted.
		return genNext, removeGenFiles(s.dir, base)
	}
	if h := findHole(quarantined, first); h != nil {
		e.opts.Logger.Error("wal: generation files inside a quarantined range are not served; remove the quarantine record to serve them again",
			"file", base+".arrows", "quarantine", h.rep.Quarantined)
		return genNext, nil
	}
	if err := s.bridge(first, quarantined, base); err != nil {
		return genNext, err
	}
	last := i == len(order)-1
	g, cut, err := loadGen(s.dir, first, s.t.schemaBytes, last, !e.opts.QuickOpen, laterAcked, e.opts.Clock.Now())
	if err == errAbandoned {
		e.opts.Logger.Warn("wal: removing a generation that provably holds no entry (its creation did not finish)",
			"table", s.t.name, "shard", s.id, "file", base+".arrows", "first_position", first)
		return genNext, removeGenFiles(s.dir, base)
	}
	var ce *corruptError
	if errors.As(err, &ce) {
		return s.holeFor(ce, order, i), nil
	}
	if err != nil {
		return genNext, err
	}
	s.logCut(g, cut)
	s.gens = append(s.gens, g)
	s.next = g.first + uint64(len(g.ents))
	if !g.sealed && !last {
		// A rotation whose covering sync never completed: its stream
		// is incomplete, and no later generation holds a synced record
		// or a seal (loadGen checked laterAcked), so nothing after it
		// was acknowledged.
		return genStop, e.removeAfterUnfinished(s.dir, order[i+1:])
	}
	return genNext, nil
}

// holeFor records the damaged generation order[i] as a hole.
func (s *shard) holeFor(ce *corruptError, order []uint64, i int) genStep {
	first := order[i]
	switch {
	case i == len(order)-1 && ce.last == 0:
		s.addHole(s.newHole(ce, first, first, 0))
		return genDone
	case i == len(order)-1:
		// Sealed with an intact index: its end is known.
		s.addHole(s.newHole(ce, first, first, ce.last))
		s.next = ce.last + 1
	default:
		s.addHole(s.newHole(ce, first, first, order[i+1]-1))
		s.next = order[i+1]
	}
	return genNext
}

// removeAfterUnfinished removes the generations written after an
// unfinished rotation.
func (e *Engine) removeAfterUnfinished(dir string, later []uint64) error {
	for _, first := range later {
		e.opts.Logger.Error("wal: removing generation written after an unfinished rotation (none of it was acknowledged)",
			"file", filepath.Join(dir, genName(first)+".arrows"), "first_position", first)
		if err := removeGenFiles(dir, filepath.Join(dir, genName(first))); err != nil {
			return err
		}
	}
	return nil
}

// bridge accounts for the positions between s.next and first, the next
// generation found: quarantined ranges, or damage (missing files).
func (s *shard) bridge(first uint64, quarantined []hole, base string) error {
	for first > s.next {
		h := findHole(quarantined, s.next)
		if h == nil {
			s.addHole(s.newHole(corruptAt(base+".arrows", 0, s.next, "positions %d..%d are missing: no generation file holds them", s.next, first-1), 0, s.next, first-1))
			s.next = first
			break
		}
		s.holes = append(s.holes, *h)
		s.next = h.rep.Last + 1
	}
	if first < s.next {
		return corruptAt(base+".arrows", 0, first, "generation starts at position %d, inside positions already held (next is %d)", first, s.next)
	}
	return nil
}

func findHole(hs []hole, pos uint64) *hole {
	for i := range hs {
		if hs[i].rep.First <= pos && pos <= hs[i].end() {
			return &hs[i]
		}
	}
	return nil
}

// ackEvidence returns, for each i, the highest position the generations
// after order[i] prove acknowledged: their synced records, and the first
// position of a sealed one (its seal record follows a sync that covered
// every earlier generation) or of a WAL3 one (it is named only after a
// sync covered its first entry, and with it every earlier generation's
// stream). The last element is 0.
func ackEvidence(dir string, order []uint64) []uint64 {
	out := make([]uint64, len(order)+1)
	for i := len(order) - 1; i >= 0; i-- {
		b, _ := os.ReadFile(filepath.Join(dir, genName(order[i])+".idx"))
		live := liveIndex(b)
		synced, sealed := idxEvidence(live)
		if hdr, ok := unmarshalRec(live); sealed || ok && hdr.kind == kindHeader3 && hdr.a == order[i] {
			synced = max(synced, order[i])
		}
		out[i] = max(out[i+1], synced)
	}
	return out
}

// listGens returns the first positions of a shard directory's generations,
// ascending, after removing unfinished temporary files and settling the
// generations under temporary names (settleTemp), and the base names of the
// trimmed generations kept for reuse (with how many of their two files
// exist).
func (e *Engine) listGens(dir string) ([]uint64, map[string]int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	firsts := map[uint64]bool{}
	temps := map[uint64][]string{}
	kept := map[string]int{}
	changed := false
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".tmp-") {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !os.IsNotExist(err) {
				return nil, nil, err
			}
			changed = true
			continue
		}
		if n == trimmedFileName || strings.HasPrefix(n, syncFailedPrefix) {
			continue
		}
		if base, ok := parseRecycledName(n); ok {
			kept[base]++
			continue
		}
		if v, ok := parseTempName(n); ok {
			temps[v] = append(temps[v], n)
			continue
		}
		v, ok := parseGenName(n)
		if !ok {
			return nil, nil, corruptAt(filepath.Join(dir, n), 0, 0, "unexpected file in a shard directory")
		}
		firsts[v] = true
	}
	for v, names := range temps {
		named, err := e.settleTemp(dir, v, names, firsts[v])
		if err != nil {
			return nil, nil, err
		}
		if named {
			firsts[v] = true
		}
		changed = true
	}
	if changed {
		if err := durable.SyncDir(dir); err != nil {
			return nil, nil, err
		}
	}
	order := make([]uint64, 0, len(firsts))
	for v := range firsts {
		order = append(order, v)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	return order, kept, nil
}

// settleTemp deals with the files of a generation still under temporary
// names (genfile.go). If one of its files already has its own name
// (hasOwn), a completed sync covered its first entry and the rename was
// interrupted: it is completed. Otherwise no sync covered its first entry,
// so none of its positions was acknowledged: its files are removed. The
// caller syncs the directory. It reports whether the generation now has
// its own names.
func (e *Engine) settleTemp(dir string, first uint64, names []string, hasOwn bool) (bool, error) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if !hasOwn {
			e.opts.Logger.Info("wal: removing a generation whose first entry was never durable (none of it was acknowledged)",
				"file", p, "first_position", first)
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return false, err
			}
			continue
		}
		own := filepath.Join(dir, genName(first)+filepath.Ext(n))
		if _, err := os.Lstat(own); err == nil {
			return false, corruptAt(p, 0, first, "both %s and %s exist", n, filepath.Base(own))
		}
		e.opts.Logger.Info("wal: completing the rename of a generation whose first entry is durable", "file", own)
		if err := os.Rename(p, own); err != nil {
			return false, err
		}
	}
	return hasOwn, nil
}

// parseTempName returns the first position named by a temporary generation
// file name (new-<first>.arrows or .idx).
func parseTempName(n string) (uint64, bool) {
	rest, ok := strings.CutPrefix(n, tempPrefix)
	if !ok {
		return 0, false
	}
	return parseGenName("gen-" + rest)
}

// parseGenName returns the first position named by a generation file name.
func parseGenName(n string) (uint64, bool) {
	base, ok := strings.CutPrefix(n, "gen-")
	if !ok {
		return 0, false
	}
	if b, isData := strings.CutSuffix(base, ".arrows"); isData {
		base = b
	} else if base, ok = strings.CutSuffix(base, ".idx"); !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(base, 10, 64)
	return v, err == nil && v > 0 && len(base) == 20
}

// removeGenFiles deletes a generation's files and makes the deletion
// durable (one sync of the shard directory).
func removeGenFiles(dir, base string) error {
	for _, p := range []string{base + ".idx", base + ".arrows"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return durable.SyncDir(dir)
}

// logCut reports what recovery cut off an open generation's end: at error
// level when an entry the index recorded was cut (a torn write or damage
// to the last entries: the two cannot be told apart), as a warning when
// only bytes no index record described (an unfinished append) went, and
// for information when those were a recycled file's leftovers.
func (s *shard) logCut(g *gen, c tailCut) {
	if c.dataBytes == 0 && c.idxRecords == 0 {
		return
	}
	args := []any{"table", s.t.name, "shard", s.id, "file", g.dataPath, "kept_through", c.from - 1,
		"first_cut_position", c.from, "cut_entries", c.entries, "cut_data_bytes", c.dataBytes, "cut_index_records", c.idxRecords}
	if c.entries > 0 {
		s.e.opts.Logger.Error("wal: cut damaged or torn entries off the end of the open generation (never acknowledged unless the disk damaged them)",
			append(args, "first_failure", c.why)...)
		return
	}
	if c.leftovers {
		s.e.opts.Logger.Info("wal: cut the open generation's files, written over a trimmed generation's, to its own entries", args...)
		return
	}
	s.e.opts.Logger.Warn("wal: truncated torn tail of open generation", args...)
}
