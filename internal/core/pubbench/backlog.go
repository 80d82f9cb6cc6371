// Package pubbench measures publication (`walctl bench publish`) and builds
// the backlogs that the benchmark and the recovery qualification publish:
// ACKed, sealed, unpublished WAL entries of a known size.
package pubbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
)

// Schema is the benchmark table's schema: a unique id, a short text and a
// 32-float embedding — about 200 bytes a record.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(32, arrow.PrimitiveTypes.Float32)},
}, nil)

// BacklogOptions describe a backlog.
type BacklogOptions struct {
	// Table is registered with Schema and Shards shards if it is not yet.
	Table  string
	Shards int
	// Bytes is the backlog's size in entry bytes (the sum of the record
	// batches' buffers, as the WAL counts them); EntryBytes the size of one
	// entry (default 1 MiB).
	Bytes      int64
	EntryBytes int64
	// Producers append concurrently (default 2), each to its own shards.
	Producers int
	// Seed makes the content reproducible; ids start at FirstID (default 1).
	Seed    uint64
	FirstID int64
	// Schema of the table (default Schema); StringBytes the length of its
	// generated strings (the generator's default if 0).
	Schema      *arrow.Schema
	StringBytes int
	// OnAck, if set, sees every entry once it is ACKed (from several
	// producer goroutines at once; the batch is released after it returns).
	OnAck func(arrow.RecordBatch)
}

// Backlog is what was appended and sealed.
type Backlog struct {
	Table   string  `json:"table"`
	Entries int64   `json:"entries"`
	Rows    int64   `json:"rows"`
	Bytes   int64   `json:"bytes"`
	FirstID int64   `json:"first_id"`
	LastID  int64   `json:"last_id"`
	Seconds float64 `json:"seconds"`
}

// MakeBacklog appends opts.Bytes of synthetic entries to log (every one
// ACKed, that is durable) and seals every shard, so all of it is publishable
// and nothing of it is published. On cancellation it stops appending and
// returns ctx's error; what was ACKed stays in the WAL.
func MakeBacklog(ctx context.Context, log wal.Log, opts BacklogOptions) (Backlog, error) {
	if opts.Shards <= 0 {
		opts.Shards = 4
	}
	if opts.EntryBytes <= 0 {
		opts.EntryBytes = 1 << 20
	}
	if opts.Producers <= 0 {
		opts.Producers = 2
	}
	if opts.FirstID <= 0 {
		opts.FirstID = 1
	}
	if opts.Schema == nil {
		opts.Schema = Schema
	}
	info, err := log.CreateTable(ctx, opts.Table, opts.Schema, opts.Shards)
	if err != nil {
		return Backlog{}, err
	}
	probe, err := synth.New(info.Schema, opts.Seed)
	if err != nil {
		return Backlog{}, err
	}
	if opts.StringBytes > 0 {
		probe.StringBytes = opts.StringBytes
	}
	sample := probe.Batch(1024)
	rowBytes := max(publish.RecordBytes(sample)/1024, 1)
	sample.Release()
	rows := int(max(opts.EntryBytes/rowBytes, 1))

	start := time.Now()
	var (
		nextID          atomic.Int64
		bytes, n, nrows atomic.Int64
		wg              sync.WaitGroup
		mu              sync.Mutex
		first           error
	)
	nextID.Store(opts.FirstID)
	for p := 0; p < opts.Producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			gen, err := synth.New(info.Schema, opts.Seed+uint64(p)+1)
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
				return
			}
			if opts.StringBytes > 0 {
				gen.StringBytes = opts.StringBytes
			}
			for i := 0; bytes.Load() < opts.Bytes && ctx.Err() == nil; i++ {
				gen.NextID = nextID.Add(int64(rows)) - int64(rows)
				b := gen.Batch(rows)
				size := publish.RecordBytes(b)
				shard := (p + i*opts.Producers) % opts.Shards
				_, err := log.Append(ctx, opts.Table, shard, b)
				if err == nil && opts.OnAck != nil {
					opts.OnAck(b)
				}
				b.Release()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("append to %s shard %d: %w", opts.Table, shard, err)
					}
					mu.Unlock()
					return
				}
				bytes.Add(size)
				n.Add(1)
				nrows.Add(int64(rows))
			}
		}(p)
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return Backlog{}, first
	}
	for s := 0; s < opts.Shards; s++ {
		if _, err := log.Seal(ctx, opts.Table, s); err != nil {
			return Backlog{}, err
		}
	}
	return Backlog{Table: opts.Table, Entries: n.Load(), Rows: nrows.Load(), Bytes: bytes.Load(),
		FirstID: opts.FirstID, LastID: nextID.Load() - 1, Seconds: time.Since(start).Seconds()}, nil
}

// Child is a finished child process: its stdout, wall time and peak
// resident set size.
type Child struct {
	Stdout []byte
	Wall   time.Duration
	// PeakRSS is the child's peak resident set size in bytes (VmHWM), from
	// the rusage wait4 returns when it exits.
	PeakRSS int64
}

// RunChild runs exe with args and env (added to nothing: pass the whole
// environment), its stderr to stderr, and waits for it. A child that fails
// is an error carrying the exit status. Cancelling ctx kills the child.
func RunChild(ctx context.Context, exe string, args, env []string, stderr io.Writer) (Child, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	start := time.Now()
	err := cmd.Run()
	c := Child{Stdout: out.Bytes(), Wall: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			c.PeakRSS = int64(ru.Maxrss)
			if runtime.GOOS != "darwin" { // Linux reports KiB, macOS bytes
				c.PeakRSS *= 1024
			}
		}
	}
	if err != nil {
		return c, fmt.Errorf("%s %v: %w", exe, args, err)
	}
	return c, nil
}
