package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// shard is one append sequence. Appends write under mu and then wait for a
// sync covering their position; whichever waiter finds no sync running
// performs one for everything written so far (group commit), with mu
// released so that later appends keep writing meanwhile (shard_sync.go).
type shard struct {
	e   *Engine
	t   *table
	id  int
	dir string

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a sync ends
	gens   []*gen     // oldest first; the last may be open
	next   uint64     // position the next append gets
	synced uint64     // highest durable position
	// written is the highest position below which every write finished;
	// unwritten[i] tells whether the write of position written+1+i is
	// still unfinished.
	written   uint64
	unwritten []bool
	trimmed   uint64 // trimmed-through position
	syncing   bool
	err       error // sticky write or sync failure
	// sealing lists, oldest first, the generations rotations closed:
	// their end-of-stream markers are written and the next sync makes
	// them durable, after which their seal records are written and they
	// become pending. Several rotations may be in flight, so that a sync
	// slower than the appends filling a generation does not stall them.
	sealing []*gen
	// pending lists sealed generations whose seal records await the next
	// sync. Until then recovery completes such a seal itself (loadGen).
	pending []*gen
	// dirDirty is set when a generation file was created since the last
	// sync: the next sync also syncs the directory.
	dirDirty bool
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
	// laterAcked[i] is the highest position vouched for by synced records
	// of generations after order[i].
	laterAcked := make([]uint64, len(order)+1)
	for i := len(order) - 1; i >= 0; i-- {
		laterAcked[i] = max(laterAcked[i+1], maxSynced(filepath.Join(s.dir, genName(order[i])+".idx")))
	}
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
		g, dropped, err := loadGen(s.dir, first, t.schemaBytes, last, !e.opts.QuickOpen, laterAcked[i+1], e.opts.Clock.Now())
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
				"file", g.dataPath, "kept_through", g.first+uint64(len(g.ents))-1, "dropped_index_records", dropped)
		}
		s.gens = append(s.gens, g)
		s.next = g.first + uint64(len(g.ents))
		if !g.sealed && !last {
			// A rotation whose sync never completed: no entry after
			// this generation was acknowledged (loadGen checked the
			// synced records), so the later generations go.
			for _, later := range order[i+1:] {
				e.opts.Logger.Warn("wal: removing generation written after an unfinished rotation",
					"file", filepath.Join(s.dir, genName(later)+".arrows"))
				if err := removeGenFiles(filepath.Join(s.dir, genName(later))); err != nil {
					return nil, err
				}
			}
			break
		}
	}
	if g := s.open(); g != nil {
		if err := g.reopen(); err != nil {
			return nil, err
		}
	}
	s.synced = s.next - 1
	s.written = s.synced
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
