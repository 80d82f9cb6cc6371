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
	if cpus < runtime.NumCPU() {
		t.Fatalf("the machine has %d CPUs, this process sees %d", cpus, runtime.NumCPU())
	}
	if busy < 0.5*float64(runtime.NumCPU()) || busy > float64(cpus)+0.01 {
		t.Fatalf("%d CPUs spun for 600 ms, the machine was %.2f of %d busy", runtime.NumCPU(), busy, cpus)
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
