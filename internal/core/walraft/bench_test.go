package walraft

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/wal"
)

// writeBytes is this process's storage writes so far (/proc/self/io).
func writeBytes(b *testing.B) int64 {
	b.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Fatalf("write amplification needs /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no write_bytes in /proc/self/io")
	return 0
}

const benchPayload = 64 << 10

// runAppends appends b.N entries from producers goroutines through app and
// reports ACKed MiB/s and storage bytes written per ACKed byte per replica.
func runAppends(b *testing.B, producers, replicas int, app func(ctx context.Context, id int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	before := writeBytes(b)
	start := time.Now()
	b.ResetTimer()
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := next.Add(1)
				if id > int64(b.N) {
					return
				}
				if err := app(context.Background(), id); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	secs := time.Since(start).Seconds()
	acked := float64(b.N) * benchPayload
	b.ReportMetric(acked/(1<<20)/secs, "ackedMiB/s")
	b.ReportMetric(float64(writeBytes(b)-before)/acked/float64(replicas), "written/acked/replica")
}

// BenchmarkAppend compares the single-directory engine with a three-replica
// group on this one disk (every replica's writes land on it).
func BenchmarkAppend(b *testing.B) {
	for _, producers := range []int{1, 16} {
		b.Run("engine/producers="+strconv.Itoa(producers), func(b *testing.B) {
			e, err := wal.Open(b.TempDir(), wal.Options{MaxGenerationAge: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			if _, err := e.CreateTable(context.Background(), "t1", testSchema, 1); err != nil {
				b.Fatal(err)
			}
			runAppends(b, producers, 1, func(ctx context.Context, id int64) error {
				rec := record(id, benchPayload)
				defer rec.Release()
				_, err := e.Append(ctx, "t1", 0, rec)
				return err
			})
		})
		b.Run("raft3/producers="+strconv.Itoa(producers), func(b *testing.B) {
			c := newCluster(b, 3, nil)
			defer c.closeAll()
			mustCreateB(b, c.leader())
			runAppends(b, producers, 3, func(ctx context.Context, id int64) error {
				rec := record(id, benchPayload)
				defer rec.Release()
				_, err := c.appendRetry(ctx, "t1", 0, rec)
				return err
			})
		})
	}
}

func mustCreateB(b *testing.B, n *Node) {
	if _, err := n.CreateTable(context.Background(), "t1", testSchema, 1); err != nil {
		b.Fatal(err)
	}
}
