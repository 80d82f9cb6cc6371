package catchuprss

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/catchup/watermarks"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/pubbench"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/proc"
	teststack "github.com/walctl/walctl/internal/testutil/stack"
)

// slack is what the acceptance allows beyond merge buffer + cache.
const slack = 64 << 20

// size reads a byte size from the environment (humanize: "2GiB"), or def.
func size(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := humanize.ParseBytes(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return int64(n)
}

// A real `walctl catchup run` on a backlog (WALCTL_RSS_BYTES, default
// 256 MiB) catches up within its budgets: its peak RSS is at most merge
// buffer + cache + 64 MiB (WALCTL_RSS_MERGE_BYTES / WALCTL_RSS_CACHE_BYTES,
// default 128 MiB / 32 MiB here so that the bound is tighter than the
// backlog), every sealed position is published, and the cache's counters
// are reported (its hit rate is printed beside the figures).
func TestCatchupRunPeakRSSWithinBudgets(t *testing.T) {
	backlog := size(t, "WALCTL_RSS_BYTES", 256<<20)
	merge := size(t, "WALCTL_RSS_MERGE_BYTES", 128<<20)
	cache := size(t, "WALCTL_RSS_CACHE_BYTES", 32<<20)
	batch := size(t, "WALCTL_RSS_BATCH_BYTES", 64<<20)
	st := teststack.Start(t, 90*time.Minute, wal.Options{})
	ctx := st.Ctx
	co := st.Coord(t, coord.Config{})

	start := time.Now()
	bl, err := pubbench.MakeBacklog(ctx, st.WAL, pubbench.BacklogOptions{Table: "rss", Shards: 4, Bytes: backlog, Seed: 18})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backlog: %s in %d entries, %d rows, built in %s", humanize.IBytes(uint64(bl.Bytes)), bl.Entries, bl.Rows, time.Since(start).Round(time.Second))

	// The master's admission reserves the table for one Job.
	store := catchup.NewStore(co, catchup.StoreOptions{})
	p := catchup.DefaultPolicy()
	p.Enabled, p.OwnedTargets, p.ThresholdGenerations = true, []string{"rss"}, 1
	m, err := catchup.OpenMaster(ctx, store, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catchup.NewScanner(store, st.WAL, watermarks.FromLance(st.LanceRoot)).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := m.Admit(ctx, catchup.Request{Target: "rss", Source: "api"})
	if err != nil || a.Decision != catchup.DecisionReserved {
		t.Fatalf("admit: %+v %v", a, err)
	}
	// The executor process opens the WAL directory itself (one writer).
	if err := st.WAL.Close(); err != nil {
		t.Fatal(err)
	}

	r := proc.NewRunner(walctlBin, t.TempDir())
	r.WaitTimeout = 80 * time.Minute
	start = time.Now()
	run := r.Start(t, "catchup-run", nil, "catchup", "run", "--table", "rss", "--job", *a.JobID,
		"--data-dir", st.Dir, "--etcd-endpoints", st.Etcd.Endpoint(), "--output", "json",
		"--soft-slice=2h", "--batch-bytes="+strconv.FormatInt(batch, 10),
		"--merge-buffer-bytes="+strconv.FormatInt(merge, 10), "--cache-bytes="+strconv.FormatInt(cache, 10))
	res := run.Wait()
	took := time.Since(start)
	if res.Code != 0 {
		t.Fatalf("catchup run: %s", res)
	}
	var rep executor.Report
	if err := json.Unmarshal([]byte(run.Stdout()), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, run.Stdout())
	}
	if rep.Outcome != executor.OutcomeCaughtUp || len(rep.Target) == 0 {
		t.Fatalf("outcome %s, target %v: want caught_up", rep.Outcome, rep.Target)
	}
	for shard, pos := range rep.Target {
		if rep.Watermarks[shard] < pos {
			t.Errorf("shard %d published to %d, sealed to %d", shard, rep.Watermarks[shard], pos)
		}
	}
	if rep.Cache == nil || rep.Cache.MaxBytes != cache || rep.Cache.PeakBytes > cache || rep.Cache.Misses == 0 {
		t.Fatalf("cache %+v: want counters of a %d-byte cache that read the backlog", rep.Cache, cache)
	}

	peak := res.MaxRSS
	if peak <= 0 {
		t.Fatal("no peak RSS reported for the executor")
	}
	bound := merge + cache + slack
	t.Logf("catchup run: %s of WAL in %d batches in %s; peak RSS %s (%.2f of the bound %s = merge buffer %s + cache %s + 64 MiB); cache peak %s, %d hits, %d misses, hit rate %.3f, %d evictions, %d skipped",
		humanize.IBytes(uint64(rep.Bytes)), len(rep.Batches), took.Round(time.Second), humanize.IBytes(uint64(peak)),
		float64(peak)/float64(bound), humanize.IBytes(uint64(bound)), humanize.IBytes(uint64(merge)), humanize.IBytes(uint64(cache)),
		humanize.IBytes(uint64(rep.Cache.PeakBytes)), rep.Cache.Hits, rep.Cache.Misses, rep.Cache.HitRate, rep.Cache.Evictions, rep.Cache.Skipped)
	fmt.Printf("catchup-rss backlog=%d merge=%d cache=%d peak_rss=%d bound=%d ratio=%.3f hit_rate=%.3f\n",
		bl.Bytes, merge, cache, peak, bound, float64(peak)/float64(bound), rep.Cache.HitRate)
	if peak > bound {
		t.Errorf("peak RSS %s exceeds merge buffer + cache + 64 MiB = %s", humanize.IBytes(uint64(peak)), humanize.IBytes(uint64(bound)))
	}
}
