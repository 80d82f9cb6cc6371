package budget

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

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
