// Package budget is a worker's shared memory budget (DESIGN.md §3 rule 12):
// every fetched WAL entry and every Lance encoder workspace reserves bytes
// against it until written, so concurrent tables and rounds together stay
// within the configured bytes.
package budget

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/walctl/walctl/internal/core/errs"
)

// ErrTooLarge is returned for a single reservation larger than the budget,
// which could never be granted (an error, not a deadlock).
var ErrTooLarge = fmt.Errorf("reservation larger than the memory budget: %w", errs.ErrInvalid)

// Budget is a byte budget shared by goroutines. A nil *Budget is unlimited.
type Budget struct {
	total    int64
	sem      *semaphore.Weighted
	reserved atomic.Int64
}

// New returns a budget of total bytes.
func New(total int64) *Budget {
	return &Budget{total: total, sem: semaphore.NewWeighted(total)}
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
// ErrTooLarge instead of waiting forever.
func (b *Budget) Reserve(ctx context.Context, n int64, what string) error {
	if b == nil || n <= 0 {
		return nil
	}
	if n > b.total {
		return fmt.Errorf("%s needs %d bytes, the budget is %d: %w", what, n, b.total, ErrTooLarge)
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.reserved.Add(n)
	return nil
}

// Reserved is the number of bytes reserved now (0 for a nil budget).
func (b *Budget) Reserved() int64 {
	if b == nil {
		return 0
	}
	return b.reserved.Load()
}

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.reserved.Add(-n)
	b.sem.Release(n)
}
