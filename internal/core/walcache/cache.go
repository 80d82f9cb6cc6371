// Package walcache is the catch-up executor's shared cache of decoded WAL
// entries (catchup.cache_bytes, DESIGN.md §4): a read of a shard's range
// is served from the cache for the positions it holds and from the WAL for
// the rest, and every entry read from the WAL is kept, least recently used
// first out, while the cache is within its bytes.
//
// The cache bounds itself twice. Its own bytes never exceed its size, and
// each cached entry also holds its bytes against the process's memory
// budget (internal/core/budget), taken only when free now (TryReserve), so
// a merge's reservations plus the cache's never exceed the budget. It is
// the budget's reclaimer: a merge that would wait for bytes gets them from
// the cache first, so cached entries never hold back a merge. `walctl
// catchup run` sizes that budget as merge buffer + cache.
//
// A cached entry is a record batch shared by reference count: the cache
// holds one reference, a reader that keeps an entry retains its own, so
// eviction never frees memory a reader still uses.
package walcache

import (
	"container/list"
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/wal"
)

// Reader is the part of wal.Log the cache reads through.
type Reader interface {
	Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error
}

// Stats are the cache's counters since New (stable JSON of `walctl catchup
// run`, key "cache").
type Stats struct {
	MaxBytes  int64 `json:"max_bytes"`
	Bytes     int64 `json:"bytes"`
	PeakBytes int64 `json:"peak_bytes"`
	Entries   int   `json:"entries"`
	// Hits counts entries served from the cache, Misses entries read from
	// the WAL.
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Evictions int64 `json:"evictions"`
	// Skipped counts entries not cached because they were larger than the
	// cache or the budget had no free bytes for them.
	Skipped int64 `json:"skipped"`
	// Reclaimed counts entries dropped for a merge that waited for bytes.
	Reclaimed int64 `json:"reclaimed"`
	// HitRate is Hits / (Hits + Misses), 0 with no reads.
	HitRate float64 `json:"hit_rate"`
}

type key struct {
	table string
	shard int
	pos   uint64
}

type item struct {
	key   key
	rec   arrow.RecordBatch
	bytes int64
}

// Cache is a bounded LRU of decoded WAL entries, safe for concurrent use.
// A nil *Cache reads straight through.
type Cache struct {
	max    int64
	budget *budget.Budget
	size   func(arrow.RecordBatch) int64

	mu    sync.Mutex
	lru   *list.List // front: most recently used
	index map[key]*list.Element
	st    Stats
}

// New returns a cache of maxBytes whose entries also hold their bytes
// against b (nil: no budget). size measures an entry's memory (the
// publisher's RecordBytes).
func New(maxBytes int64, b *budget.Budget, size func(arrow.RecordBatch) int64) *Cache {
	c := &Cache{max: maxBytes, budget: b, size: size, lru: list.New(), index: map[key]*list.Element{},
		st: Stats{MaxBytes: maxBytes}}
	b.SetReclaimer(c.reclaim)
	return c
}

// reclaim is the budget's reclaimer: a merge waiting for n bytes gets them
// from the cache first, least recently used entries out, so cached entries
// never hold back a merge.
func (c *Cache) reclaim(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for freed := int64(0); freed < n && c.lru.Len() > 0; c.st.Reclaimed++ {
		freed += c.evictOldest()
	}
}

// Read has wal.Log's Read contract (fn gets entries from..to in order; a
// record is valid until fn returns unless fn retains it; to == 0 is the
// last durable position). Positions the cache holds are served from it;
// from the first one it does not hold, the rest of the range is read from
// src, and each entry read is cached. Cancellation is checked before each
// cached entry and by src for the rest.
func (c *Cache) Read(ctx context.Context, src Reader, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	if c == nil {
		return src.Read(ctx, table, shard, from, to, fn)
	}
	pos := from
	for to == 0 || pos <= to {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := c.get(key{table, shard, pos})
		if rec == nil {
			break
		}
		err := fn(wal.Entry{Position: pos, Record: rec})
		rec.Release()
		if err != nil {
			return err
		}
		pos++
	}
	if to != 0 && pos > to {
		return nil
	}
	return src.Read(ctx, table, shard, pos, to, func(e wal.Entry) error {
		c.put(key{table, shard, e.Position}, e.Record)
		return fn(e)
	})
}

// get returns the cached record retained for the caller, or nil.
func (c *Cache) get(k key) arrow.RecordBatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[k]
	if !ok {
		return nil
	}
	c.st.Hits++
	c.lru.MoveToFront(el)
	it := el.Value.(*item)
	it.rec.Retain()
	return it.rec
}

// put counts an entry read from the WAL (a miss) and caches rec
// (retaining it) if it fits the cache and the budget, evicting least
// recently used entries to make room.
func (c *Cache) put(k key, rec arrow.RecordBatch) {
	n := c.size(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Misses++
	if _, ok := c.index[k]; ok {
		return
	}
	if n > c.max {
		c.st.Skipped++
		return
	}
	for c.st.Bytes+n > c.max {
		c.evictOldest()
		c.st.Evictions++
	}
	if !c.budget.TryReserve(n) {
		c.st.Skipped++
		return
	}
	rec.Retain()
	c.index[k] = c.lru.PushFront(&item{key: k, rec: rec, bytes: n})
	c.st.Bytes += n
	c.st.Entries++
	c.st.PeakBytes = max(c.st.PeakBytes, c.st.Bytes)
}

func (c *Cache) evictOldest() int64 {
	el := c.lru.Back()
	it := el.Value.(*item)
	c.lru.Remove(el)
	delete(c.index, it.key)
	it.rec.Release()
	c.budget.Release(it.bytes)
	c.st.Bytes -= it.bytes
	c.st.Entries--
	return it.bytes
}

// Stats returns the counters now.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	if st.Hits+st.Misses > 0 {
		st.HitRate = float64(st.Hits) / float64(st.Hits+st.Misses)
	}
	return st
}

// Close drops every entry and returns their bytes to the budget.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		c.evictOldest()
	}
}
