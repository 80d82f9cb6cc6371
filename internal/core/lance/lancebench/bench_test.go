package lancebench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

// BenchmarkWalctlVsOfficial runs one full comparison per iteration and
// reports both throughputs; go test -bench . -benchtime 1x.
func BenchmarkWalctlVsOfficial(b *testing.B) {
	o := oracletest.MustFind(b)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		res, err := Run(ctx, o, b.TempDir(), DefaultConfig)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Walctl.MiBPerSec, "walctl-MiB/s")
		b.ReportMetric(res.Walctl21.MiBPerSec, "walctl21-MiB/s")
		b.ReportMetric(res.Official.MiBPerSec, "official-MiB/s")
		b.ReportMetric(res.SpeedRatio, "speed-ratio")
		b.ReportMetric(res.SpeedRatio21, "speed-ratio-2.1")
		b.ReportMetric(res.FileSizeRatio, "size-ratio")
		b.ReportMetric(res.FileSizeRatio21, "size-ratio-2.1")
		b.Logf("%+v", res)
	}
}

// TestBenchSmall checks a tiny run end to end: every side writes every row
// and the official reader counts them in both walctl tables.
func TestBenchSmall(t *testing.T) {
	o := oracletest.MustFind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Adds: 2, BatchesPerAdd: 2, RowsPerBatch: 100}
	dir := t.TempDir()
	res, err := Run(ctx, o, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Side{res.Walctl, res.Walctl21, res.Official} {
		if s.Rows != 400 || s.DataBytes <= 0 || s.MiBPerSec <= 0 {
			t.Fatalf("bench result %+v", res)
		}
	}
	for _, table := range []string{"walctl.lance", "walctl21.lance"} {
		d, err := o.Dump(ctx, filepath.Join(dir, table), oracle.DumpOptions{Filter: "id >= 390", Columns: []string{"id", "vec"}})
		if err != nil {
			t.Fatal(err)
		}
		if d.CountRows != 10 || len(d.Columns["vec"]) != 10 {
			t.Fatalf("%s: official reader sees %d rows (%d vectors) with id >= 390, want 10", table, d.CountRows, len(d.Columns["vec"]))
		}
	}
}
