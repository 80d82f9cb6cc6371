package e2ebench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/worker"
)

// A short real run (embedded etcd, WAL engine, worker, all real): every
// ACKed entry becomes visible, the table holds exactly the ACKed rows, and
// the official LanceDB reader counts the same rows, each id once.
func TestRunPublishesEveryAckedEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := Run(ctx, Config{
		Dir: dir, Keep: true, Duration: 3 * time.Second, Rate: 1 << 20, DDMiB: 1,
		Producers: 2, Shards: 2, EntryBytes: 32 << 10,
		Engine: wal.Options{MaxGenerationAge: 500 * time.Millisecond},
		Worker: worker.Config{PollInterval: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.AckedEntries == 0 || !res.Drained || res.VisibleEntries != res.AckedEntries || res.VisibleRows != res.AckedRows {
		t.Fatalf("acked %d entries (%d rows), visible %d (%d rows), drained %v", res.AckedEntries, res.AckedRows, res.VisibleEntries, res.VisibleRows, res.Drained)
	}
	if res.TableRows != res.AckedRows || res.UnackedVisible != 0 || res.Unknown != 0 {
		t.Fatalf("table holds %d rows, %d ACKed; %d unacked visible, %d unknown appends", res.TableRows, res.AckedRows, res.UnackedVisible, res.Unknown)
	}
	if res.Freshness.Count != res.AckedEntries || res.Freshness.P50 <= 0 || res.Freshness.Max < res.Freshness.P99 || res.Freshness.P99 < res.Freshness.P50 {
		t.Fatalf("freshness %+v for %d entries", res.Freshness, res.AckedEntries)
	}
	if len(res.Samples) < 3 || res.Versions < 2 || res.AckedMiBps <= 0 || res.DDMiBps <= 0 || len(res.PeakRSS) != 1 || res.PeakRSS[0].Bytes <= 0 {
		t.Fatalf("series and figures missing: %d samples, %d versions, %+v", len(res.Samples), res.Versions, res)
	}
	if err := res.Load.Check(res.ProduceSeconds); err != nil {
		t.Fatalf("while producing: %v", err)
	}
	last := res.Samples[len(res.Samples)-1]
	if last.AckedBytes > res.AckedBytes || last.AckedEntries > res.AckedEntries {
		t.Fatalf("last sample %+v beyond the totals", last)
	}

	o := oracletest.MustFind(t)
	d, err := o.Dump(ctx, filepath.Join(res.Dir, "tables", Table+".lance"), oracle.DumpOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if int64(d.CountRows) != res.AckedRows || int64(len(d.Columns["id"])) != res.AckedRows {
		t.Fatalf("official reader: %d rows (%d ids), %d ACKed", d.CountRows, len(d.Columns["id"]), res.AckedRows)
	}
	seen := map[int64]bool{}
	for _, raw := range d.Columns["id"] {
		id, err := oracle.ParseInt64(raw)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("official reader: id %d twice", id)
		}
		seen[id] = true
	}
	t.Logf("%d entries, %.2f MiB/s ACKed, freshness p50 %.2fs p99 %.2fs max %.2fs, %d versions",
		res.AckedEntries, res.AckedMiBps, res.Freshness.P50, res.Freshness.P99, res.Freshness.Max, res.Versions)
}

// A run whose data would not fit under its directory is refused before a
// producer starts (exit 2), naming what it would write, where (the --dir
// given), and the free space; nothing is left behind.
func TestRunRefusesARunThatWouldFillItsDisk(t *testing.T) {
	dir := t.TempDir()
	_, err := Run(context.Background(), Config{Dir: dir, Duration: time.Hour, Rate: 1 << 50, DDMiB: 1})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "would write up to") ||
		!strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "free: shorten --duration or lower --rate") {
		t.Fatalf("a run of 2^50 B/s for an hour: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if err := checkSpace(dir, 1<<20, time.Second); err != nil {
		t.Fatalf("1 MiB/s for a second: %v", err)
	}
}
