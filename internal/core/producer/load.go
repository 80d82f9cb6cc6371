// Package producer appends synthetic records (package synth) to the WAL:
// the concurrent load of `walctl wal load` and the exact production of the
// quick start.
package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
)

// DefaultIDSpan is the size of each producer's id range in a Load.
const DefaultIDSpan = int64(1) << 32

// LoadConfig configures Load: concurrent producers appending synthetic
// batches of a table's schema to its shards.
type LoadConfig struct {
	Table     string
	Info      wal.TableInfo // the table's registration (schema, shards)
	Producers int
	BatchRows int
	// BytesPerSecond limits all producers together (0: no limit). The
	// limiter's burst is a tenth of a second of the rate, so a run never
	// writes much more than the rate allows.
	BytesPerSecond float64
	// MaxBytes stops the load once this many bytes were ACKed (0: until ctx
	// ends).
	MaxBytes int64
	Seed     uint64
	// FirstID and IDSpan give producer p the ids [FirstID + p·IDSpan,
	// FirstID + (p+1)·IDSpan): no two producers share or interleave ids.
	FirstID int64
	IDSpan  int64
	// CallTimeout bounds each append.
	CallTimeout time.Duration
	// Retries is how many consecutive failed appends a producer survives
	// before it stops; RetryBackoff is the wait after each (doubling).
	Retries      int
	RetryBackoff time.Duration
	Clock        clock.Clock
	// Progress, when set, is called after every ACKed entry (concurrently).
	Progress func(LoadStatus)
	// StringBytes is the length of the generated strings (synth's default
	// if 0).
	StringBytes int
	// ReuseValues, when > 0, has each producer generate the values of that
	// many batches only and append them again in turn with fresh ids
	// (synth.Generator.Reuse): generation then costs little beside the
	// appends (benchmarks).
	ReuseValues int
	// OnAck, when set, sees every ACKed batch before it is released
	// (concurrently).
	OnAck func(arrow.RecordBatch)
	// OnAckAt, when set, learns where every ACKed entry went: its shard
	// and WAL position, rows and bytes (concurrently, right after the ACK).
	OnAckAt func(shard int, position uint64, rows, bytes int64)
}

// LoadStatus is the running total of a Load.
type LoadStatus struct {
	Entries, Rows, Bytes int64
}

// IDRange is the ids [First, Last].
type IDRange struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// ProducerResult is what one producer did. Acked lists the ids every ACKed
// entry holds; Unknown the ids of appends whose outcome is ambiguous (the
// WAL may or may not hold them — never both, never twice: they are not
// sent again). Error is why the producer stopped early, if it did.
type ProducerResult struct {
	Producer int       `json:"producer"`
	FirstID  int64     `json:"first_id"`
	NextID   int64     `json:"next_id"`
	Entries  int64     `json:"entries"`
	Rows     int64     `json:"rows"`
	Bytes    int64     `json:"bytes"`
	Failures int       `json:"failed_appends"`
	Acked    []IDRange `json:"acked_ids"`
	Unknown  []IDRange `json:"unknown_ids"`
	Error    string    `json:"error,omitempty"`
}

// Load runs the producers until ctx ends or MaxBytes were ACKed, and
// returns what each did. An append that fails with an error wrapping
// errs.ErrUnavailable may or may not have been applied (wal.Log): its ids
// are recorded as unknown and never appended again, so a retry cannot
// duplicate a record; the producer waits RetryBackoff and continues with
// fresh ids, and stops after Retries consecutive failures. Any other
// failure (an unknown table, a schema mismatch) stops the producer at
// once. The error joins every producer's stopping error; the result is
// complete even then. Cancellation of ctx is a normal end, not an error.
func Load(ctx context.Context, log wal.Log, cfg LoadConfig) ([]ProducerResult, error) {
	cfg = cfg.withDefaults()
	var limiter *rate.Limiter
	if cfg.BytesPerSecond > 0 {
		limiter = rate.NewLimiter(rate.Limit(cfg.BytesPerSecond), max(int(cfg.BytesPerSecond/10), 1))
	}
	l := &loader{cfg: cfg, log: log, limiter: limiter}
	out := make([]ProducerResult, cfg.Producers)
	errc := make([]error, cfg.Producers)
	var wg sync.WaitGroup
	for p := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[p], errc[p] = l.produce(ctx, p)
		}()
	}
	wg.Wait()
	return out, errors.Join(errc...)
}

func (c LoadConfig) withDefaults() LoadConfig {
	if c.IDSpan <= 0 {
		c.IDSpan = DefaultIDSpan
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	return c
}

type loader struct {
	cfg     LoadConfig
	log     wal.Log
	limiter *rate.Limiter

	mu    sync.Mutex
	total LoadStatus
}

func (l *loader) done() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.MaxBytes > 0 && l.total.Bytes >= l.cfg.MaxBytes
}

func (l *loader) acked(rows, bytes int64) {
	l.mu.Lock()
	l.total.Entries++
	l.total.Rows += rows
	l.total.Bytes += bytes
	st := l.total
	l.mu.Unlock()
	if l.cfg.Progress != nil {
		l.cfg.Progress(st)
	}
}

// wait takes n bytes from the limiter in pieces no larger than its burst.
func (l *loader) wait(ctx context.Context, n int64) error {
	for l.limiter != nil && n > 0 {
		k := min(n, int64(l.limiter.Burst()))
		if err := l.limiter.WaitN(ctx, int(k)); err != nil {
			return err
		}
		n -= k
	}
	return ctx.Err()
}

func (l *loader) produce(ctx context.Context, p int) (ProducerResult, error) {
	cfg := l.cfg
	res := ProducerResult{Producer: p, FirstID: cfg.FirstID + int64(p)*cfg.IDSpan, Acked: []IDRange{}, Unknown: []IDRange{}}
	res.NextID = res.FirstID
	gen, err := synth.New(cfg.Info.Schema, cfg.Seed+uint64(p))
	if err != nil {
		res.Error = err.Error()
		return res, err
	}
	if cfg.StringBytes > 0 {
		gen.StringBytes = cfg.StringBytes
	}
	gen.Reuse = cfg.ReuseValues
	defer gen.Release()
	limit := res.FirstID + cfg.IDSpan
	consecutive := 0
	for i := 0; !l.done(); i++ {
		if res.NextID+int64(cfg.BatchRows) > limit {
			err := fmt.Errorf("producer %d used up its id range of %d: %w", p, cfg.IDSpan, errs.ErrInvalid)
			res.Error = err.Error()
			return res, err
		}
		gen.NextID = res.NextID
		b := gen.Batch(cfg.BatchRows)
		size := publish.RecordBytes(b)
		if l.wait(ctx, size) != nil {
			b.Release()
			return res, nil
		}
		ids := IDRange{First: res.NextID, Last: res.NextID + int64(cfg.BatchRows) - 1}
		res.NextID += int64(cfg.BatchRows)
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		shard := (p + i*cfg.Producers) % cfg.Info.Shards
		pos, err := l.log.Append(cctx, cfg.Table, shard, b)
		cancel()
		if err == nil && cfg.OnAckAt != nil {
			cfg.OnAckAt(shard, pos, int64(cfg.BatchRows), size)
		}
		if err == nil && cfg.OnAck != nil {
			cfg.OnAck(b)
		}
		b.Release()
		if err == nil {
			consecutive = 0
			res.Entries, res.Rows, res.Bytes = res.Entries+1, res.Rows+int64(cfg.BatchRows), res.Bytes+size
			res.Acked = addRange(res.Acked, ids)
			l.acked(int64(cfg.BatchRows), size)
			continue
		}
		res.Failures++
		if errors.Is(err, errs.ErrUnavailable) || ctx.Err() != nil {
			res.Unknown = addRange(res.Unknown, ids) // may or may not be durable
		}
		if ctx.Err() != nil {
			return res, nil
		}
		if consecutive++; !errors.Is(err, errs.ErrUnavailable) || consecutive > cfg.Retries {
			err = fmt.Errorf("producer %d: append ids %d…%d: %w", p, ids.First, ids.Last, err)
			res.Error = err.Error()
			return res, err
		}
		select {
		case <-cfg.Clock.After(cfg.RetryBackoff << (consecutive - 1)):
		case <-ctx.Done():
			return res, nil
		}
	}
	return res, nil
}

// addRange appends r to ranges, merging it into the last when adjacent.
func addRange(ranges []IDRange, r IDRange) []IDRange {
	if n := len(ranges); n > 0 && ranges[n-1].Last+1 == r.First {
		ranges[n-1].Last = r.Last
		return ranges
	}
	return append(ranges, r)
}
