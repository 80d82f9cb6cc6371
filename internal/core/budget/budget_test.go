package budget

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTooLargeIsAnErrorNotAWait(t *testing.T) {
	b := New(100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Reserve(ctx, 101, "entry 7"); !errors.Is(err, ErrTooLarge) || ctx.Err() != nil {
		t.Fatalf("reserve 101 of 100: %v", err)
	}
	if b.Reserved() != 0 {
		t.Fatalf("reserved %d after a refusal", b.Reserved())
	}
}

// A large waiter does not hold back smaller reservations that fit: the
// writers they feed are what will free the large one's bytes.
func TestWaitersAreNotServedInOrder(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if err := b.Reserve(ctx, 60, "a"); err != nil {
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() { big <- b.Reserve(ctx, 80, "big") }()
	small := make(chan error, 1)
	go func() { small <- b.Reserve(ctx, 30, "small") }()
	select {
	case err := <-small:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fitting reservation waited behind a larger one")
	}
	b.Release(90) // a and small
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	if b.Reserved() != 80 {
		t.Fatalf("reserved %d, want 80", b.Reserved())
	}
	if b.TryReserve(21) || !b.TryReserve(20) {
		t.Fatal("TryReserve ignores the free bytes")
	}
}

func TestReserveStopsOnCancellation(t *testing.T) {
	b := New(10)
	if err := b.Reserve(context.Background(), 10, "all"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Reserve(ctx, 5, "waiter") }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reserve: %v", err)
	}
	if b.Reserved() != 10 {
		t.Fatalf("a cancelled reserve took bytes: %d", b.Reserved())
	}
}

func TestPermitsBoundConcurrency(t *testing.T) {
	p := NewPermits(2)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := p.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if p.InUse() != 2 || p.Size() != 2 {
		t.Fatalf("in use %d of %d", p.InUse(), p.Size())
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.Acquire(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third permit: %v", err)
	}
	p.Release()
	if err := p.Acquire(ctx); err != nil || p.InUse() != 2 {
		t.Fatalf("after a release: %v, in use %d", err, p.InUse())
	}
	var nilPool *Permits
	if nilPool.Acquire(ctx) != nil || nilPool.InUse() != 0 {
		t.Fatal("a nil pool is unlimited")
	}
}
