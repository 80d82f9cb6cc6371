package wal

import (
	"context"
	"math/bits"
	"os"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Read buffers are recycled for callers that say they release what they
// read. A read that allocates every entry afresh makes the process touch
// new memory for every byte it reads, and first-touched memory is slow:
// on the VMs walctl is measured on it cost a publication more CPU than
// reading the WAL from the page cache (fresh 1 MiB buffers read at ~0.3
// GiB/s, a reused one at ~7 GiB/s).

type recycleKey struct{}

// RecycleBuffers marks ctx's reads as reads whose entries the engine may
// read into recycled buffers: the caller touches an entry's record only
// while it holds a reference to it (the callback's, or one it took with
// Retain and gives back with Release) and its Raw bytes only during the
// callback, and keeps no value that aliases the record's memory (a string
// of a string column, say) past its last Release. The buffer is reused
// once every reference to the record, and every array sliced from it, is
// released. Readers other than the engine ignore it.
func RecycleBuffers(ctx context.Context) context.Context {
	return context.WithValue(ctx, recycleKey{}, true)
}

func recycling(ctx context.Context) bool {
	on, _ := ctx.Value(recycleKey{}).(bool)
	return on
}

// Buffers are pooled by size class: four classes per power of two, so a
// buffer is at most a quarter larger than its entry, for entries of more
// than 64 KiB and at most 64 MiB; others get a buffer of their own.
const (
	minRecycledShift = 16
	maxRecycledShift = 26
)

var recycledPools [maxRecycledShift - minRecycledShift][4]sync.Pool

// sizeClass returns the pool and buffer size of an entry of n bytes, or
// nil when entries of n bytes are not recycled.
func sizeClass(n int64) (*sync.Pool, int64) {
	if n <= 1<<minRecycledShift || n > 1<<maxRecycledShift {
		return nil, 0
	}
	s := bits.Len64(uint64(n-1)) - 1 // 2^s < n <= 2^(s+1)
	step := int64(1) << (s - 2)
	q := (n - 1<<s + step - 1) / step // 1..4
	return &recycledPools[s-minRecycledShift][q-1], 1<<s + q*step
}

// poisonRecycled fills a buffer with 0xdb as it returns to the pool, so a
// use after the last Release reads garbage at once (tests and the fault
// suites set WALCTL_WAL_POISON_RECYCLED=1).
var poisonRecycled = os.Getenv("WALCTL_WAL_POISON_RECYCLED") != ""

// SetPoisonRecycled turns poisoning on or off (for tests).
func SetPoisonRecycled(on bool) { poisonRecycled = on }

// readBuffer returns a buffer of n bytes for an entry, and the function
// that hands it back (nil for a buffer of its own).
func readBuffer(ctx context.Context, n int64) ([]byte, func()) {
	pool, size := sizeClass(n)
	if pool == nil || !recycling(ctx) {
		return make([]byte, n), nil
	}
	bp, _ := pool.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, size)
		bp = &b
	}
	return (*bp)[:n], func() {
		if poisonRecycled {
			b := (*bp)[:cap(*bp)]
			for i := range b {
				b[i] = 0xdb
			}
		}
		pool.Put(bp)
	}
}

// recycler is the allocator of a decoded entry's body buffer: arrow calls
// Free once the body and every slice of it are released, and the entry's
// buffer goes back to its pool.
type recycler struct{ put func() }

func (r recycler) Allocate(int) []byte           { panic("wal: recycler allocates nothing") }
func (r recycler) Reallocate(int, []byte) []byte { panic("wal: recycler allocates nothing") }
func (r recycler) Free([]byte)                   { r.put() }

var _ memory.Allocator = recycler{}
