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
		if l := Now().Busy(Now()); l != (Load{}) {
			t.Fatalf("no /proc/stat here, yet Busy = %s", l.Text())
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
	l := start.Busy(Now())
	if err := l.Check(0.6); err != nil {
		t.Fatal(err)
	}
	if l.BusyCPUs < 0.5*float64(runtime.NumCPU()) {
		t.Fatalf("%d CPUs spun for 600 ms, the machine was %s busy", runtime.NumCPU(), l.Text())
	}
}

// TestShortWindowIsNotMeasured: two samples a moment apart are too close
// for /proc/stat's clock ticks to say anything, and Busy says so rather
// than giving 0 busy (or 2 of 2 from a single tick).
func TestShortWindowIsNotMeasured(t *testing.T) {
	if l := Now().Busy(Now()); l != (Load{}) || l.Text() != "-" {
		t.Fatalf("two samples a moment apart gave %s", l.Text())
	}
	if err := (Load{}).Check(0.01); err != nil {
		t.Fatalf("a 10 ms window not measured: %v", err)
	}
	if runtime.GOOS == "linux" {
		if err := (Load{}).Check(1); err == nil {
			t.Fatal("a one-second window on Linux not measured, and Check took it")
		}
		if err := (Load{BusyCPUs: 3, CPUs: 2}).Check(1); err == nil {
			t.Fatal("3 of 2 CPUs busy, and Check took it")
		}
		if err := (Load{BusyCPUs: -0.5, CPUs: 2}).Check(1); err == nil {
			t.Fatal("-0.5 of 2 CPUs busy, and Check took it")
		}
	}
}

func TestEmptySamples(t *testing.T) {
	s := Now()
	for _, pair := range [][2]Sample{{{}, s}, {s, {}}, {s, s}} {
		if l := pair[0].Busy(pair[1]); l != (Load{}) {
			t.Fatalf("Busy(%+v, %+v) = %s; want not measured", pair[0], pair[1], l.Text())
		}
	}
}
