package wal

import "sync"

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
	// holes are the ranges of positions the shard cannot serve: damage
	// found at open, or generations quarantined (damage.go). frozen is set
	// when one reaches the shard's end, which is then unknown: appends and
	// seals fail with it.
	holes  []hole
	frozen error
	// free holds trimmed generations' files kept for reuse (keeping more
	// are being renamed for it); reading the tickets of reads in
	// progress, readSeq the last ticket issued (recycle_gen.go).
	free    []*recycled
	keeping int
	reading map[uint64]struct{}
	readSeq uint64
}

// open returns the open generation, or nil.
func (s *shard) open() *gen {
	if n := len(s.gens); n > 0 && !s.gens[n-1].sealed {
		return s.gens[n-1]
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
