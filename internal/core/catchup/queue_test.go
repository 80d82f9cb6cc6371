package catchup

import (
	"context"
	"testing"
	"time"

	fakeclock "k8s.io/utils/clock/testing"
)

func TestWorkQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := fakeclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := newWorkQueue(clk, time.Second, 8*time.Second)

	q.Add("a")
	q.Add("a")
	q.Add("b")
	if q.Len() != 2 {
		t.Fatalf("len %d, want 2 (deduplicated)", q.Len())
	}
	k, _ := q.Get(ctx)
	q.Add(k) // re-added while processing: queued again after Done
	if q.Len() != 1 {
		t.Fatalf("a key being processed was queued twice")
	}
	q.Done(k)
	if q.Len() != 2 {
		t.Fatalf("len %d after Done of a dirty key, want 2", q.Len())
	}
	for q.Len() > 0 {
		k, _ := q.Get(ctx)
		q.Done(k)
	}

	// Delayed keys come out only when the fake clock reaches them.
	q.AddAfter("late", 30*time.Second)
	got := make(chan string, 1)
	go func() {
		k, ok := q.Get(ctx)
		if ok {
			q.Done(k)
		}
		got <- k
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	select {
	case k := <-got:
		t.Fatalf("%q came out before its time", k)
	default:
	}
	clk.Step(30 * time.Second)
	if k := <-got; k != "late" {
		t.Fatalf("got %q", k)
	}

	// Rate limiting doubles per key up to the cap; Forget resets it.
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		q.AddRateLimited("x")
		q.mu.Lock()
		at := q.waiting["x"]
		delete(q.waiting, "x")
		q.mu.Unlock()
		if d := at.Sub(clk.Now()); d != want*time.Second {
			t.Fatalf("rate-limited delay %d = %s, want %s", i, d, want*time.Second)
		}
	}
	q.Forget("x")
	q.AddRateLimited("x")
	if d := q.waiting["x"].Sub(clk.Now()); d != time.Second {
		t.Fatalf("after Forget: %s", d)
	}

	cancel()
	if _, ok := q.Get(ctx); ok {
		t.Fatal("Get returned a key after cancellation")
	}
}
