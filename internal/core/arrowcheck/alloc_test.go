package arrowcheck_test

import (
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
)

// TestAllocatorBudget: an Allocator hands out its budget and no byte more,
// refusing before allocating (a panic wrapping ErrAllocBound from
// Allocate, an error from Take); Reset starts a new budget; Peak keeps the
// most handed out under one.
func TestAllocatorBudget(t *testing.T) {
	a := arrowcheck.NewAllocator(100)
	if b := a.Allocate(60); len(b) != 60 {
		t.Fatalf("got %d bytes", len(b))
	}
	if b := a.Reallocate(30, make([]byte, 10, 40)); len(b) != 30 || a.Left() != 40 {
		t.Fatalf("a reallocation within capacity is free: %d bytes, %d left", len(b), a.Left())
	}
	if err := a.Take(41); !errors.Is(err, arrowcheck.ErrAllocBound) || !errors.Is(err, errs.ErrInvalid) || a.Left() != 40 {
		t.Fatalf("Take beyond the budget: %v, %d left", err, a.Left())
	}
	func() {
		defer func() {
			if p, _ := recover().(error); !errors.Is(p, arrowcheck.ErrAllocBound) {
				t.Fatalf("Allocate beyond the budget panicked with %v", p)
			}
		}()
		a.Allocate(1 << 40)
		t.Fatal("Allocate beyond the budget returned")
	}()
	if err := a.Take(-1); err == nil {
		t.Fatal("a negative size was taken")
	}
	a.Reset(10)
	if a.Left() != 10 || a.Take(10) != nil || a.Take(1) == nil || a.Peak() != 60 {
		t.Fatalf("after Reset: %d left, peak %d", a.Left(), a.Peak())
	}
}

// TestBudgets: n bytes may decode to 64·n + 1 MiB; one message read on its
// own to at most 256 MiB.
func TestBudgets(t *testing.T) {
	for _, c := range []struct {
		n              int
		budget, perMsg int64
	}{
		{0, 1 << 20, 1 << 20},
		{500, 64*500 + 1<<20, 64*500 + 1<<20},
		{64 << 20, 4<<30 + 1<<20, 256 << 20},
	} {
		if b, m := arrowcheck.DecodeBudget(c.n), arrowcheck.MessageBudget(c.n); b != c.budget || m != c.perMsg {
			t.Errorf("%d bytes: budget %d, per message %d; want %d, %d", c.n, b, m, c.budget, c.perMsg)
		}
	}
}
