package wal

import (
	"fmt"
	"os"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/writeback"
)

// append writes one encoded entry and waits until it is durable. Once the
// entry is written the wait is not cancellable: the outcome is then known.
//
// The entry's position and its place in the files are reserved under mu;
// the bytes are written with mu released, so that concurrent appends copy
// into the page cache in parallel and a finished sync takes mu back at
// once. Writes may therefore finish out of order: a sync covers only the
// positions up to s.written, below which every write has finished.
func (s *shard) append(raw []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, err := s.writeLocked(raw)
	if err != nil {
		return 0, err
	}
	return pos, s.awaitSynced(pos)
}

// appendAll writes raws in order and waits for one sync covering them all,
// returning their positions (consecutive unless another appender's entry
// slipped in while a write ran with mu released).
func (s *shard) appendAll(raws [][]byte) ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := make([]uint64, 0, len(raws))
	for _, raw := range raws {
		p, err := s.writeLocked(raw)
		if err != nil {
			return nil, err
		}
		pos = append(pos, p)
	}
	if len(pos) == 0 {
		return nil, nil
	}
	return pos, s.awaitSynced(pos[len(pos)-1])
}

// awaitSynced waits (mu held) until a sync covers pos.
func (s *shard) awaitSynced(pos uint64) error {
	for s.synced < pos {
		if s.err != nil {
			return s.err
		}
		s.waitOrSync()
	}
	return nil
}

// writeLocked writes one entry (mu held on entry and on return; released
// while the bytes are copied) and returns its position, not yet durable.
func (s *shard) writeLocked(raw []byte) (uint64, error) {
	crc := crc32c(raw)
	var g *gen
	for {
		if s.err != nil {
			return 0, s.err
		}
		if s.frozen != nil {
			return 0, s.frozen
		}
		g = s.open()
		if g != nil && (len(g.ents) == 0 || g.size+int64(len(raw)) <= s.e.opts.MaxGenerationBytes && !s.expired(g)) {
			break
		}
		if len(s.sealing) >= maxRotationsInFlight {
			s.waitOrSync()
			continue
		}
		if err := s.rotateLocked(g); err != nil {
			return 0, err
		}
	}
	if len(g.ents) == 0 { // age is counted from the first entry
		g.openedAt = s.e.opts.Clock.Now()
		s.e.wakeSealer()
	}
	rec := idxRec{kind: kindEntry, crc: crc, a: uint64(g.size), b: uint64(len(raw)), salt: g.salt}.marshal()
	if s.synced >= g.first && s.synced > g.marked {
		rec = append(idxRec{kind: kindSynced, a: s.synced, salt: g.salt}.marshal(), rec...)
	}
	if len(rec) > recSize {
		g.marked = s.synced
	}
	off, idxOff := g.size, g.idxSize
	g.ents = append(g.ents, entryMeta{off: off, n: int64(len(raw)), crc: crc})
	g.size += int64(len(raw))
	g.idxSize += int64(len(rec))
	pos := s.next
	s.next++
	s.unwritten = append(s.unwritten, true)
	// g's files stay open meanwhile: a generation is closed only once a
	// sync covered all its positions, and so this write.
	s.mu.Unlock()
	if testHookReserved != nil {
		testHookReserved(pos)
	}
	_, err := g.data.WriteAt(raw, off)
	if err == nil {
		// Start writing the entry back now: the disk works while later
		// entries arrive, and the group sync finds less to do.
		writeback.Start(g.data, off, int64(len(raw)))
	}
	what := g.dataPath
	if err == nil {
		_, err = g.idx.WriteAt(rec, idxOff)
		what = g.idxPath
	}
	s.mu.Lock()
	if err != nil {
		return 0, s.fail("write "+what, err)
	}
	s.finishWrite(pos)
	return pos, nil
}

// expired tells whether g reached the age limit. An append then rotates
// it, as when it is full: on a busy shard the age sealer may find no moment
// without a sync or a write in flight.
func (s *shard) expired(g *gen) bool {
	age := s.e.opts.MaxGenerationAge
	return age > 0 && !s.e.opts.Clock.Now().Before(g.openedAt.Add(age))
}

// fail records a sticky write or sync failure and returns it.
func (s *shard) fail(what string, err error) error {
	s.err = fmt.Errorf("table %q shard %d: %s: %w: %w", s.t.name, s.id, what, err, ErrIO)
	s.cond.Broadcast()
	return s.err
}

// syncFailed stops the shard after a failed sync (fail) and cuts what that
// sync was to make durable out of the open files: each data file back to
// what an earlier, completed sync covered (gen.durable). On Linux a failed
// fsync may leave those pages clean but never written: a later open in the
// same boot would read them from the page cache, its own syncs would
// succeed, it would serve them, and a power loss would then take them away
// and issue their positions again. Cut here, recovery never sees them (a
// torn tail; their index records then describe bytes past the file's end).
// Generations under temporary names are removed by recovery anyway.
// Nothing is synced: what is cut was never durable.
func (s *shard) syncFailed(err error) {
	s.fail("sync", err)
	for _, g := range s.gens {
		if g.data == nil || g.name == nameTemp {
			continue
		}
		if terr := g.data.Truncate(g.durable); terr != nil {
			s.e.opts.Logger.Error("wal: cutting what a failed sync covered out of the page cache", "file", g.dataPath, "err", terr)
		}
	}
}

// finishWrite records that the write of pos finished and advances
// s.written over the finished prefix.
func (s *shard) finishWrite(pos uint64) {
	s.unwritten[pos-s.written-1] = false
	n := 0
	for n < len(s.unwritten) && !s.unwritten[n] {
		n++
	}
	s.unwritten = s.unwritten[n:]
	s.written += uint64(n)
}

// waitOrSync waits for the running sync, or runs one. When nothing is
// written beyond the durable point but writes are unfinished it waits too:
// each unfinished write's appender syncs (or waits for a sync) once it
// finishes, and every sync ends with a broadcast.
func (s *shard) waitOrSync() {
	if s.syncing || s.written == s.synced && s.written < s.next-1 {
		s.cond.Wait()
		return
	}
	s.syncLocked()
}

// testHookRecycled, when set by a test, is called when a generation is
// created over a trimmed one's files.
var testHookRecycled func()

// testHookReserved, when set by a test, is called when an append has its
// position and its place in the files, before it writes them.
var testHookReserved func(pos uint64)

// testHookRotated, when set by a test, sees the number of rotations in
// flight after each rotation.
var testHookRotated func(inFlight int)

// maxRotationsInFlight bounds the generations awaiting their seal, and so
// the files a shard holds open.
const maxRotationsInFlight = 8

// syncLocked makes everything written so far durable: the open generation,
// the generations being sealed, pending seal records and, after a
// generation was renamed, the directory — all in one concurrent round, with
// mu dropped. Afterwards the generations whose first entry the round
// covered get their own names (nameCovered), and those being sealed get
// their seal records once their names are durable. Positions become
// acknowledged (s.synced) up to the first generation whose name is not yet
// durable: its name is what proves, after a crash, that it holds entries.
func (s *shard) syncLocked() {
	target := s.written
	var files []*os.File
	if g := s.open(); g != nil {
		files = append(files, g.data, g.idx)
	}
	// The round seals the first nSealing of s.sealing, those whose
	// entries are all written; rotations during the round append to
	// s.sealing. It covers the first nPending of s.pending.
	nSealing, nPending := 0, len(s.pending)
	for nSealing < len(s.sealing) && s.sealing[nSealing].last() <= target {
		nSealing++
	}
	for _, sg := range s.sealing {
		files = append(files, sg.data, sg.idx)
	}
	for _, p := range s.pending {
		files = append(files, p.idx)
	}
	dir := ""
	if s.dirDirty {
		dir, s.dirDirty = s.dir, false
	}
	renamed := s.gensNamed(nameRenamed)
	covered := s.dataEnds(target)
	if len(files) == 0 && dir == "" {
		s.ackThrough(target)
		return
	}
	s.syncing = true
	s.mu.Unlock()
	err := syncAll(files, dir)
	s.mu.Lock()
	s.syncing = false
	if err != nil {
		s.syncFailed(err)
		return
	}
	for g, end := range covered {
		g.durable = max(g.durable, end)
	}
	if dir != "" {
		for _, g := range renamed {
			g.name = nameDurable
		}
	}
	if err := s.nameCovered(target); err != nil {
		s.cond.Broadcast()
		return
	}
	s.ackThrough(target)
	s.donePending(nPending)
	for nSealing > 0 && s.sealing[nSealing-1].name != nameDurable {
		nSealing-- // sealed by a later round, once named
	}
	sealed := s.sealing[:nSealing]
	s.sealing = s.sealing[nSealing:]
	for _, sg := range sealed {
		if err := s.writeSeal(sg); err != nil {
			break
		}
		sg.data.Close()
		sg.data = nil
		s.pending = append(s.pending, sg)
	}
	s.cond.Broadcast()
}

// dataEnds returns, under mu, how far a sync round up to position target
// makes the data files it covers durable: for the open generation and those
// being sealed, the end of their last entry at or below target (entries
// above it may still be being written, their bytes not yet in the page
// cache when the sync runs), and the end-of-stream marker of one whose
// entries are all at or below it (written at its rotation).
func (s *shard) dataEnds(target uint64) map[*gen]int64 {
	out := map[*gen]int64{}
	end := func(g *gen) int64 {
		k := 0
		if target >= g.first {
			k = min(len(g.ents), int(target-g.first+1))
		}
		if k == 0 {
			return int64(len(s.t.schemaBytes))
		}
		return g.ents[k-1].off + g.ents[k-1].n
	}
	if g := s.open(); g != nil {
		out[g] = end(g)
	}
	for _, sg := range s.sealing {
		out[sg] = end(sg)
		if len(sg.ents) > 0 && sg.last() <= target {
			out[sg] += int64(len(eos))
		}
	}
	return out
}

// gensNamed returns the shard's generations in name state st, under mu.
func (s *shard) gensNamed(st nameState) []*gen {
	var out []*gen
	for _, g := range s.gens {
		if g.name == st {
			out = append(out, g)
		}
	}
	return out
}

// nameCovered renames, in order, the generations under temporary names
// whose first entry a completed sync up to target covered (with their
// header and schema prefix): their files then hold a durable entry. The
// next sync includes the directory.
func (s *shard) nameCovered(target uint64) error {
	for _, g := range s.gensNamed(nameTemp) {
		if len(g.ents) == 0 || g.first > target {
			break
		}
		if err := g.rename(s.dir); err != nil {
			return s.fail("rename "+g.dataPath, err)
		}
		s.dirDirty = true
	}
	return nil
}

// ackThrough advances s.synced to target, but not into a generation whose
// name is not yet durable.
func (s *shard) ackThrough(target uint64) {
	for _, g := range s.gens {
		if g.name != nameDurable && g.first <= target {
			target = g.first - 1
			break
		}
	}
	s.synced = max(s.synced, target)
}

// donePending closes the indexes of the first n pending generations once a
// sync covered their seal records.
func (s *shard) donePending(n int) {
	for _, p := range s.pending[:n] {
		p.closeFiles()
	}
	s.pending = s.pending[n:]
}

// writeSeal appends g's seal record (not synced) and marks it sealed. The
// end-of-stream marker must already be durable, so that a seal record
// always describes a complete stream. A recycled index is cut after it
// (leftovers that survive a crash are ignored: liveIndex).
func (s *shard) writeSeal(g *gen) error {
	now := s.e.opts.Clock.Now()
	rec := idxRec{kind: kindSeal, a: uint64(g.size) + uint64(len(eos)), b: uint64(now.UnixNano()), salt: g.salt}.marshal()
	_, err := g.idx.WriteAt(rec, g.idxSize)
	if err == nil && g.recycled {
		err = g.idx.Truncate(g.idxSize + recSize)
	}
	if err != nil {
		return s.fail("seal "+g.idxPath, err)
	}
	g.size += int64(len(eos))
	g.idxSize += recSize
	g.sealed, g.sealedAt = true, now
	return nil
}

// rotateLocked closes old (the open generation, nil if none) and creates
// the next generation under temporary names, without syncing: appends
// continue into the new generation while the next group sync makes old's
// entries and end-of-stream marker durable together with the new files; the
// new generation is then renamed (nameCovered), and its entries are
// acknowledged once a later sync made the rename durable. A crash before
// that leaves old incomplete or the new generation under temporary names;
// recovery then cuts old back to its whole entries and removes the newer
// generation, none of whose entries can have been acknowledged.
func (s *shard) rotateLocked(old *gen) error {
	g, err := s.createGen()
	if err != nil {
		return s.fail("create generation", err)
	}
	if old != nil {
		if err := old.writeEOS(); err != nil {
			g.closeFiles()
			return s.fail("seal "+old.dataPath, err)
		}
		s.sealing = append(s.sealing, old)
		if testHookRotated != nil {
			testHookRotated(len(s.sealing))
		}
	}
	s.gens = append(s.gens, g)
	return nil
}

// createGen creates the next generation, over a trimmed generation's files
// when one is free (mu held).
func (s *shard) createGen() (*gen, error) {
	now := s.e.opts.Clock.Now()
	if r := s.takeRecycled(); r != nil {
		g, err := newGen(s.dir, s.next, s.t.schemaBytes, now, r)
		if err == nil {
			if testHookRecycled != nil {
				testHookRecycled()
			}
			return g, nil
		}
		s.e.opts.Logger.Warn("wal: reusing a trimmed generation's files failed; creating new ones", "file", r.base+".arrows", "err", err)
		os.Remove(r.base + ".arrows")
		os.Remove(r.base + ".idx")
	}
	return newGen(s.dir, s.next, s.t.schemaBytes, now, nil)
}

// writeEOS writes g's end-of-stream marker and cuts recycled data files
// after it, so that the sync making the marker durable also makes the
// stream end there.
func (g *gen) writeEOS() error {
	_, err := g.data.WriteAt(eos, g.size)
	if err == nil && g.recycled {
		err = g.data.Truncate(g.size + int64(len(eos)))
	}
	return err
}

// sealNowLocked seals g, the open generation, durably before returning; no
// sync may be running, no rotation in flight, no write unfinished and g's
// name must be durable (sealReady).
func (s *shard) sealNowLocked(g *gen) error {
	if err := g.writeEOS(); err != nil {
		return s.fail("seal "+g.dataPath, err)
	}
	files := []*os.File{g.data, g.idx}
	nPending := len(s.pending)
	for _, p := range s.pending {
		files = append(files, p.idx)
	}
	dir := ""
	if s.dirDirty {
		dir, s.dirDirty = s.dir, false
	}
	if err := syncAll(files, dir); err != nil {
		s.syncFailed(err)
		return s.err
	}
	g.durable = g.size + int64(len(eos))
	s.donePending(nPending)
	s.synced = s.next - 1
	if err := s.writeSeal(g); err != nil {
		return err
	}
	if err := durable.DataSync(g.idx); err != nil {
		return s.fail("seal "+g.idxPath, err)
	}
	g.closeFiles()
	s.cond.Broadcast()
	return nil
}

// sealReady tells, under mu, whether the open generation g (nil if none)
// may be sealed now: no sync running, no rotation in flight, no write
// unfinished, and g named durably (a generation is sealed under its own
// names only).
func (s *shard) sealReady(g *gen) bool {
	return !s.syncing && len(s.sealing) == 0 && s.written == s.next-1 && (g == nil || len(g.ents) == 0 || g.name == nameDurable)
}

// seal seals the open generation if it has entries.
func (s *shard) seal() (Generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.err != nil {
			return Generation{}, s.err
		}
		if s.frozen != nil {
			return Generation{}, s.frozen
		}
		g := s.open()
		switch {
		case g == nil || len(g.ents) == 0:
			return Generation{}, nil
		case !s.sealReady(g):
			s.waitOrSync()
			continue
		}
		if err := s.sealNowLocked(g); err != nil {
			return Generation{}, err
		}
		return s.describe(g), nil
	}
}

// sealIfOlder seals the open generation if its first entry came at or
// before cutoff; otherwise it returns when that entry came (zero if the
// shard has no open entries).
func (s *shard) sealIfOlder(cutoff time.Time) (opened time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.err == nil && !s.sealReady(s.open()) {
		s.waitOrSync()
	}
	g := s.open()
	switch {
	case g == nil || len(g.ents) == 0 || s.err != nil:
		return time.Time{}, nil
	case g.openedAt.After(cutoff):
		return g.openedAt, nil
	}
	return time.Time{}, s.sealNowLocked(g)
}

// close makes everything durable (finishing a rotation in flight) and
// closes the files.
func (s *shard) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.err == nil && (s.syncing || len(s.sealing) > 0 || len(s.pending) > 0 || s.dirDirty || s.synced < s.next-1) {
		s.waitOrSync()
	}
	for _, g := range s.gens {
		g.closeFiles()
	}
	return s.err
}
