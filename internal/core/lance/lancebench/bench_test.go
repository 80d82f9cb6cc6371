package lancebench

import (
	"context"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// BenchmarkWalctlVsOfficial runs one full comparison per iteration and
// reports both throughputs; go test -bench . -benchtime 1x.
func BenchmarkWalctlVsOfficial(b *testing.B) {
	o := oracle.MustFind(b)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		res, err := Run(ctx, o, b.TempDir(), DefaultConfig)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Walctl.MiBPerSec, "walctl-MiB/s")
		b.ReportMetric(res.Official.MiBPerSec, "official-MiB/s")
		b.ReportMetric(res.SpeedRatio, "speed-ratio")
		b.ReportMetric(res.FileSizeRatio, "size-ratio")
		b.Logf("%+v", res)
	}
}

// TestBenchSmall checks a tiny run end to end: both sides write every row.
func TestBenchSmall(t *testing.T) {
	o := oracle.MustFind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Adds: 2, BatchesPerAdd: 2, RowsPerBatch: 100}
	res, err := Run(ctx, o, t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Walctl.Rows != 400 || res.Official.Rows != 400 || res.Walctl.DataBytes <= 0 || res.Official.DataBytes <= 0 {
		t.Fatalf("bench result %+v", res)
	}
}
