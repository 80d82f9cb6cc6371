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
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/producer"
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

// Backlog is what was appended and sealed. Every id in [FirstID, LastID]
// that an ACKed entry holds is unique, but the range is not contiguous:
// producer p appends ids from FirstID + p·producer.DefaultIDSpan.
type Backlog struct {
	Table   string  `json:"table"`
	Entries int64   `json:"entries"`
	Rows    int64   `json:"rows"`
	Bytes   int64   `json:"bytes"`
	FirstID int64   `json:"first_id"`
	LastID  int64   `json:"last_id"`
	Seconds float64 `json:"seconds"`
}

func (o BacklogOptions) withDefaults() BacklogOptions {
	if o.Shards <= 0 {
		o.Shards = 4
	}
	if o.EntryBytes <= 0 {
		o.EntryBytes = 1 << 20
	}
	if o.Producers <= 0 {
		o.Producers = 2
	}
	if o.FirstID <= 0 {
		o.FirstID = 1
	}
	if o.Schema == nil {
		o.Schema = Schema
	}
	return o
}

// MakeBacklog appends opts.Bytes of synthetic entries to log (every one
// ACKed, that is durable) with producer.Load and seals every shard, so all
// of it is publishable and nothing of it is published. On cancellation it
// stops appending and returns ctx's error; what was ACKed stays in the WAL.
// A failed append stops it (no retry).
func MakeBacklog(ctx context.Context, log wal.Log, opts BacklogOptions) (Backlog, error) {
	opts = opts.withDefaults()
	info, err := log.CreateTable(ctx, opts.Table, opts.Schema, opts.Shards)
	if err != nil {
		return Backlog{}, err
	}
	rows, err := EntryRows(info.Schema, opts.EntryBytes, opts.Seed, opts.StringBytes)
	if err != nil {
		return Backlog{}, err
	}
	start := time.Now()
	res, err := producer.Load(ctx, log, producer.LoadConfig{
		Table: opts.Table, Info: info, Producers: opts.Producers, BatchRows: rows, MaxBytes: opts.Bytes,
		Seed: opts.Seed + 1, FirstID: opts.FirstID, StringBytes: opts.StringBytes, OnAck: opts.OnAck,
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return Backlog{}, err
	}
	for s := 0; s < opts.Shards; s++ {
		if _, err := log.Seal(ctx, opts.Table, s); err != nil {
			return Backlog{}, err
		}
	}
	bl := Backlog{Table: opts.Table, FirstID: opts.FirstID, LastID: opts.FirstID - 1}
	for _, r := range res {
		bl.Entries, bl.Rows, bl.Bytes = bl.Entries+r.Entries, bl.Rows+r.Rows, bl.Bytes+r.Bytes
		for _, ids := range r.Acked {
			bl.LastID = max(bl.LastID, ids.Last)
		}
	}
	bl.Seconds = time.Since(start).Seconds()
	return bl, nil
}

// EntryRows is how many rows of the schema's synthetic records (package
// synth, with seed and stringBytes as producer.Load makes them) make an
// entry of about entryBytes.
func EntryRows(schema *arrow.Schema, entryBytes int64, seed uint64, stringBytes int) (int, error) {
	probe, err := synth.New(schema, seed)
	if err != nil {
		return 0, err
	}
	if stringBytes > 0 {
		probe.StringBytes = stringBytes
	}
	sample := probe.Batch(1024)
	defer sample.Release()
	rowBytes := max(publish.RecordBytes(sample)/1024, 1)
	return int(max(entryBytes/rowBytes, 1)), nil
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
