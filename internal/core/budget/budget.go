// Package budget is a worker's shared memory budget (DESIGN.md §3 rule 12):
// every fetched WAL entry and every Lance encoder workspace reserves bytes
// against it until written, so concurrent tables and rounds together stay
// within the configured bytes. Next to it, Permits bound the concurrent
// fetch/decode operations of the process.
package budget

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/walctl/walctl/internal/core/errs"
)

// ErrTooLarge is returned for a single reservation larger than the budget,
// which could never be granted (an error, not a deadlock).
var ErrTooLarge = fmt.Errorf("reservation larger than the memory budget: %w", errs.ErrInvalid)

// Budget is a byte budget shared by goroutines. A nil *Budget is unlimited.
//
// Waiters are not served in order: any waiter whose bytes fit is granted
// when bytes are released. A large reservation waiting at the head of a
// queue would otherwise hold back the small ones of writers that are
// already running — and whose progress is what frees the bytes it waits
// for.
type Budget struct {
	total   int64
	mu      sync.Mutex
	used    int64
	wake    chan struct{} // closed and replaced on every release
	reclaim func(n int64)
}

// SetReclaimer installs fn, which Reserve calls (without the budget's lock)
// before it waits, with the bytes it is short of: a holder of bytes that
// can be dropped at any time — a cache — releases up to n of them. The
// reclaimer itself must reserve only with TryReserve. Set it before the
// budget is shared.
func (b *Budget) SetReclaimer(fn func(n int64)) {
	if b != nil {
		b.reclaim = fn
	}
}

// New returns a budget of total bytes.
func New(total int64) *Budget {
	return &Budget{total: total, wake: make(chan struct{})}
}

// Total is the budget's size.
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total
}

// Reserve blocks until n bytes are available or ctx ends (then it reserves
// nothing and returns ctx's error). what names the reservation in errors. A
// single reservation larger than the whole budget fails at once with
// ErrTooLarge instead of waiting forever. Before waiting it asks the
// reclaimer, if any, for the bytes it is short of.
func (b *Budget) Reserve(ctx context.Context, n int64, what string) error {
	if b == nil || n <= 0 {
		return nil
	}
	if n > b.total {
		return fmt.Errorf("%s needs %d bytes, the budget is %d: %w", what, n, b.total, ErrTooLarge)
	}
	for {
		b.mu.Lock()
		if b.used+n <= b.total {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		wake, short := b.wake, b.used+n-b.total
		b.mu.Unlock()
		if b.reclaim != nil {
			b.reclaim(short) // a release closes wake: the loop checks again
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TryReserve reserves n bytes if they are available now and reports
// whether it did.
func (b *Budget) TryReserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total {
		return false
	}
	b.used += n
	return true
}

// Reserved is the number of bytes reserved now (0 for a nil budget).
func (b *Budget) Reserved() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Release returns n bytes and wakes the waiters.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("budget: released more than reserved")
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// DefaultPermits is the number of concurrent fetch/decode operations of a
// process when none is configured.
const DefaultPermits = 4

// Permits bounds the fetch/decode operations of a process (DESIGN.md §3 rule
// 12): buffered and streamed preparation of every table take one permit per
// WAL entry they fetch and decode, so concurrent tables, rounds and files
// together decode at most N entries at once. It lives next to the Budget
// because the two are shared the same way: one of each per process. A nil
// *Permits is unlimited.
type Permits struct {
	n     int64
	sem   *semaphore.Weighted
	inUse atomic.Int64
}

// NewPermits returns a pool of n permits (DefaultPermits if n <= 0).
func NewPermits(n int) *Permits {
	if n <= 0 {
		n = DefaultPermits
	}
	return &Permits{n: int64(n), sem: semaphore.NewWeighted(int64(n))}
}

// Size is the number of permits in the pool.
func (p *Permits) Size() int {
	if p == nil {
		return 0
	}
	return int(p.n)
}

// Acquire blocks until a permit is free or ctx ends; on cancellation it
// holds nothing and returns ctx's error.
func (p *Permits) Acquire(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	p.inUse.Add(1)
	return nil
}

// Release returns a permit. The holder releases it only once the operation
// it guards has returned, even when that operation was cancelled: a decode
// blocked in I/O keeps its permit until it gives up.
func (p *Permits) Release() {
	if p == nil {
		return
	}
	p.inUse.Add(-1)
	p.sem.Release(1)
}

// InUse is the number of permits held now.
func (p *Permits) InUse() int {
	if p == nil {
		return 0
	}
	return int(p.inUse.Load())
}
