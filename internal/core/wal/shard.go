package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// shard is one append sequence. Appends write under mu and then wait for a
// sync covering their position; whichever waiter finds no sync running
// performs one for everything written so far (group commit), with mu
// released so that later appends keep writing meanwhile.
type shard struct {
	e   *Engine
	t   *table
	id  int
	dir string

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a sync ends
	gens    []*gen     // oldest first; the last may be open
	next    uint64     // position the next append gets
	synced  uint64     // highest durable position
	trimmed uint64     // trimmed-through position
	syncing bool
	err     error // sticky write or sync failure
	// pending is a generation sealed by a rotation whose seal record is
	// written but not yet synced; the next sync covers its index. Until
	// then recovery completes such a seal itself (see loadGen).
	pending *gen
}

// open returns the open generation, or nil.
func (s *shard) open() *gen {
	if n := len(s.gens); n > 0 && !s.gens[n-1].sealed {
		return s.gens[n-1]
	}
	return nil
}

func (e *Engine) loadShard(t *table, id int) (*shard, error) {
	s := &shard{e: e, t: t, id: id, dir: filepath.Join(t.dir, shardDirName(id))}
	s.cond = sync.NewCond(&s.mu)
	var err error
	if s.trimmed, err = readUint(s.dir, trimmedFileName); err != nil {
		return nil, err
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("table %q shard %d: %w", t.name, id, err)
	}
	firsts := map[uint64]bool{}
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".tmp-") {
			os.Remove(filepath.Join(s.dir, n))
			continue
		}
		if n == trimmedFileName {
			continue
		}
		base, ok := strings.CutPrefix(n, "gen-")
		if ok {
			base, ok = strings.CutSuffix(base, ".arrows")
			if !ok {
				base, ok = strings.CutSuffix(strings.TrimPrefix(n, "gen-"), ".idx")
			}
		}
		v, perr := strconv.ParseUint(base, 10, 64)
		if !ok || perr != nil || v == 0 {
			return nil, fmt.Errorf("%s: unexpected file in a shard directory: %w", filepath.Join(s.dir, n), ErrCorruptEntry)
		}
		firsts[v] = true
	}
	var order []uint64
	for v := range firsts {
		order = append(order, v)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	if n := len(order); n > 0 {
		// A last generation without entry records holds nothing; it may
		// be a rotation interrupted before the previous seal completed.
		base := filepath.Join(s.dir, genName(order[n-1]))
		if st, err := os.Stat(base + ".idx"); err != nil || st.Size() < 2*recSize {
			if err := removeGenFiles(base); err != nil {
				return nil, err
			}
			order = order[:n-1]
		}
	}
	s.next = s.trimmed + 1
	for i, first := range order {
		name := filepath.Join(s.dir, genName(first))
		if first <= s.trimmed {
			// Trimmed, but the crash came before the files were deleted.
			if err := removeGenFiles(name); err != nil {
				return nil, err
			}
			continue
		}
		last := i == len(order)-1
		g, dropped, err := loadGen(s.dir, first, t.schemaBytes, last, !e.opts.QuickOpen, e.opts.Clock.Now())
		if err == errAbandoned {
			e.opts.Logger.Warn("wal: removing generation whose creation did not finish", "file", name+".arrows")
			if err := removeGenFiles(name); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if g.first != s.next {
			return nil, fmt.Errorf("%s: generation starts at position %d, expected %d: %w", g.dataPath, g.first, s.next, ErrCorruptEntry)
		}
		if dropped > 0 {
			e.opts.Logger.Warn("wal: truncated torn tail of open generation",
				"file", g.dataPath, "kept_through", g.first+uint64(len(g.ents))-1, "dropped_records", dropped)
		}
		if !g.sealed {
			if err := g.reopen(); err != nil {
				return nil, err
			}
		}
		s.gens = append(s.gens, g)
		s.next = g.first + uint64(len(g.ents))
	}
	s.synced = s.next - 1
	return s, nil
}

func removeGenFiles(base string) error {
	for _, p := range []string{base + ".idx", base + ".arrows"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// append writes one encoded entry and waits until it is durable. Once the
// entry is written the wait is not cancellable: the outcome is then known.
func (s *shard) append(raw []byte) (uint64, error) {
	crc := crc32c(raw)
	max := s.e.opts.MaxGenerationBytes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	g := s.open()
	for g == nil || len(g.ents) > 0 && g.size+int64(len(raw)) > max {
		if s.syncing { // sealing needs the running sync to finish
			s.cond.Wait()
			if s.err != nil {
				return 0, s.err
			}
			g = s.open()
			continue
		}
		if err := s.rotateLocked(g); err != nil {
			return 0, err
		}
		g = s.open()
	}
	if len(g.ents) == 0 { // age is counted from the first entry
		g.openedAt = s.e.opts.Clock.Now()
		s.e.wakeSealer()
	}
	rec := idxRec{kind: kindEntry, crc: crc, a: uint64(g.size), b: uint64(len(raw))}.marshal()
	if s.synced >= g.first && s.synced > g.marked {
		rec = append(idxRec{kind: kindSynced, a: s.synced}.marshal(), rec...)
	}
	if _, err := g.data.WriteAt(raw, g.size); err != nil {
		s.err = fmt.Errorf("table %q shard %d: write %s: %v: %w", s.t.name, s.id, g.dataPath, err, ErrIO)
		return 0, s.err
	}
	if _, err := g.idx.WriteAt(rec, g.idxSize); err != nil {
		s.err = fmt.Errorf("table %q shard %d: write %s: %v: %w", s.t.name, s.id, g.idxPath, err, ErrIO)
		return 0, s.err
	}
	if len(rec) > recSize {
		g.marked = s.synced
	}
	g.ents = append(g.ents, entryMeta{off: g.size, n: int64(len(raw)), crc: crc})
	g.size += int64(len(raw))
	g.idxSize += int64(len(rec))
	pos := s.next
	s.next++
	for s.synced < pos {
		if s.err != nil {
			return 0, s.err
		}
		if s.syncing {
			s.cond.Wait()
			continue
		}
		s.syncLocked()
	}
	return pos, nil
}

// syncLocked makes everything written to the open generation durable. It
// drops mu while syncing.
func (s *shard) syncLocked() {
	g := s.open()
	target := s.next - 1
	if g == nil {
		s.synced = target
		return
	}
	files := []*os.File{g.data, g.idx}
	p := s.pending
	if p != nil {
		files = append(files, p.idx)
	}
	s.syncing = true
	s.mu.Unlock()
	err := syncAll(files, "")
	s.mu.Lock()
	s.syncing = false
	if err != nil {
		s.err = fmt.Errorf("table %q shard %d: sync %s: %v: %w", s.t.name, s.id, g.dataPath, err, ErrIO)
	} else {
		s.synced = max(s.synced, target)
		s.donePending(p)
	}
	s.cond.Broadcast()
}

// donePending closes p's index once a sync covered its seal record.
func (s *shard) donePending(p *gen) {
	if p != nil && s.pending == p {
		p.closeFiles()
		s.pending = nil
	}
}

// rotateLocked seals old (the open generation, nil if none) and opens a new
// generation after it; no sync may be running. The new generation's files,
// the directory and old's entries and end-of-stream marker are synced in one
// concurrent round; only then is old's seal record written and synced. A
// crash in between leaves an empty last generation, which recovery removes,
// and an unsealed one before it, which becomes the open generation again.
func (s *shard) rotateLocked(old *gen) error {
	g, err := newGen(s.dir, s.next, s.t.schemaBytes, s.e.opts.Clock.Now())
	if err != nil {
		s.err = fmt.Errorf("table %q shard %d: create generation: %v: %w", s.t.name, s.id, err, ErrIO)
		return s.err
	}
	if err := s.sealLocked(old, g, true); err != nil {
		g.closeFiles()
		return err
	}
	s.gens = append(s.gens, g)
	return nil
}

// sealLocked seals g, the open generation (nil: nothing to seal), with no
// sync running; next, if set, is a new generation whose files are synced
// together with g's. The end-of-stream marker is durable before the seal
// record is written, so a seal record always describes a complete stream.
// With deferSync the seal record's own sync is left to the next group sync
// (s.pending): a crash before it leaves a complete stream without a seal
// record, which recovery seals.
func (s *shard) sealLocked(g, next *gen, deferSync bool) error {
	fail := func(what string, err error) error {
		s.err = fmt.Errorf("table %q shard %d: %s: %v: %w", s.t.name, s.id, what, err, ErrIO)
		return s.err
	}
	var files []*os.File
	dir := ""
	if next != nil {
		files, dir = append(files, next.data, next.idx), s.dir
	}
	p := s.pending
	if p != nil {
		files = append(files, p.idx)
	}
	if g != nil {
		if _, err := g.data.WriteAt(eos, g.size); err != nil {
			return fail("seal "+g.dataPath, err)
		}
		files = append(files, g.data, g.idx)
	}
	if err := syncAll(files, dir); err != nil {
		return fail("sync", err)
	}
	s.donePending(p)
	if g == nil {
		return nil
	}
	now := s.e.opts.Clock.Now()
	rec := idxRec{kind: kindSeal, a: uint64(g.size) + uint64(len(eos)), b: uint64(now.UnixNano())}.marshal()
	if _, err := g.idx.WriteAt(rec, g.idxSize); err != nil {
		return fail("seal "+g.idxPath, err)
	}
	if deferSync {
		g.data.Close()
		g.data = nil
		s.pending = g
	} else {
		if err := fdatasync(g.idx); err != nil {
			return fail("seal "+g.idxPath, err)
		}
		g.closeFiles()
	}
	g.size += int64(len(eos))
	g.idxSize += recSize
	g.sealed, g.sealedAt = true, now
	s.synced = s.next - 1
	s.cond.Broadcast()
	return nil
}

// seal seals the open generation if it has entries.
func (s *shard) seal() (Generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.err != nil {
			return Generation{}, s.err
		}
		g := s.open()
		if g == nil || len(g.ents) == 0 {
			return Generation{}, nil
		}
		if s.syncing {
			s.cond.Wait()
			continue
		}
		if err := s.sealLocked(g, nil, false); err != nil {
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
	for s.syncing {
		s.cond.Wait()
	}
	g := s.open()
	switch {
	case g == nil || len(g.ents) == 0 || s.err != nil:
		return time.Time{}, nil
	case g.openedAt.After(cutoff):
		return g.openedAt, nil
	}
	return time.Time{}, s.sealLocked(g, nil, false)
}

func (s *shard) describe(g *gen) Generation {
	n := len(g.ents)
	last := g.first + uint64(n) - 1
	if !g.sealed && last > s.synced {
		n = int(s.synced - g.first + 1)
		last = s.synced
	}
	var bytes int64
	if n > 0 {
		bytes = g.ents[n-1].off + g.ents[n-1].n - int64(len(s.t.schemaBytes))
	}
	return Generation{ID: g.first, First: g.first, Last: last, Entries: n, Bytes: bytes,
		Sealed: g.sealed, SealedAt: g.sealedAt, Path: g.dataPath}
}

// close syncs and closes the open generation's files.
func (s *shard) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.syncing {
		s.cond.Wait()
	}
	var files []*os.File
	if p := s.pending; p != nil {
		files = append(files, p.idx)
	}
	g := s.open()
	if g != nil && g.data != nil {
		files = append(files, g.data, g.idx)
	}
	var err error
	if len(files) > 0 {
		err = syncAll(files, "")
	}
	if s.pending != nil {
		s.pending.closeFiles()
		s.pending = nil
	}
	if g != nil {
		g.closeFiles()
	}
	return err
}
