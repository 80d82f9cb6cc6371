package cpuload

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestBusyCountsASpinningCPU spins one goroutine per CPU for a while: the
// machine was then busy on most of its CPUs, never more than all of them.
func TestBusyCountsASpinningCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		if b, n := Now().Busy(Now()); b != 0 || n != 0 {
			t.Fatalf("no /proc/stat here, yet Busy = %v of %d", b, n)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := Now()
	done := make(chan struct{})
	for i := 0; i < runtime.NumCPU(); i++ {
		go func() {
			for ctx.Err() == nil {
			}
			done <- struct{}{}
		}()
	}
	for i := 0; i < runtime.NumCPU(); i++ {
		<-done
	}
	busy, cpus := start.Busy(Now())
	if err := Check(busy, cpus, 0.6); err != nil {
		t.Fatal(err)
	}
	if busy < 0.5*float64(runtime.NumCPU()) {
		t.Fatalf("%d CPUs spun for 600 ms, the machine was %.2f of %d busy", runtime.NumCPU(), busy, cpus)
	}
}

// TestShortWindowIsNotMeasured: two samples a moment apart are too close
// for /proc/stat's clock ticks to say anything, and Busy says so rather
// than giving 0 busy (or 2 of 2 from a single tick).
func TestShortWindowIsNotMeasured(t *testing.T) {
	if b, n := Now().Busy(Now()); b != 0 || n != 0 {
		t.Fatalf("two samples a moment apart gave %.2f of %d", b, n)
	}
	if err := Check(0, 0, 0.01); err != nil {
		t.Fatalf("a 10 ms window not measured: %v", err)
	}
	if runtime.GOOS == "linux" {
		if err := Check(0, 0, 1); err == nil {
			t.Fatal("a one-second window on Linux not measured, and Check took it")
		}
		if err := Check(3, 2, 1); err == nil {
			t.Fatal("3 of 2 CPUs busy, and Check took it")
		}
		if err := Check(-0.5, 2, 1); err == nil {
			t.Fatal("-0.5 of 2 CPUs busy, and Check took it")
		}
	}
}

func TestEmptySamples(t *testing.T) {
	s := Now()
	for _, pair := range [][2]Sample{{{}, s}, {s, {}}, {s, s}} {
		if b, n := pair[0].Busy(pair[1]); b != 0 || n != 0 {
			t.Fatalf("Busy(%+v, %+v) = %v, %d; want 0, 0", pair[0], pair[1], b, n)
		}
	}
}
