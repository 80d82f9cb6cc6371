package exactlyonce

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
)

// ErrProducedTwice is a producer's bug: an id ACKed a second time.
var ErrProducedTwice = errors.New("producer made an id twice")

// Acked is the log of ACKed ids: an id is added only once its append was
// ACKed. Safe for concurrent use.
type Acked struct {
	mu  sync.Mutex
	ids map[int64]int // id → times ACKed
}

// NewAcked returns an empty log.
func NewAcked() *Acked { return &Acked{ids: map[int64]int{}} }

// Add logs the ids of an ACKed batch (its int64 "id" column); an id ACKed
// twice is an error of the producer (ErrProducedTwice).
func (a *Acked) Add(b arrow.RecordBatch) error {
	idx := b.Schema().FieldIndices(synth.IDField)
	if len(idx) == 0 {
		return fmt.Errorf("batch has no %q column", synth.IDField)
	}
	ids, ok := b.Column(idx[0]).(*array.Int64)
	if !ok {
		return fmt.Errorf("column %q is %s, want int64", synth.IDField, b.Column(idx[0]).DataType())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var dup error
	for i := 0; i < ids.Len(); i++ {
		id := ids.Value(i)
		a.ids[id]++
		if a.ids[id] > 1 && dup == nil {
			dup = fmt.Errorf("%w: id %d", ErrProducedTwice, id)
		}
	}
	return dup
}

// Snapshot copies the ids ACKed so far.
func (a *Acked) Snapshot() map[int64]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int64]bool, len(a.ids))
	for id := range a.ids {
		out[id] = true
	}
	return out
}

// Len is the number of ids ACKed so far.
func (a *Acked) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

// Log is where a Producer appends: the WAL server's Flight client or the
// in-process engine.
type Log interface {
	Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error)
	Seal(ctx context.Context, table string, shard int) (wal.Generation, error)
}

// Producer appends synthetic batches with unique ids to one table and logs
// each id once its append is ACKed. Not safe for concurrent use: give each
// goroutine its own, with its own id range (FirstID), sharing one Acked.
type Producer struct {
	Log   Log
	Table string
	Gen   *synth.Generator
	Acked *Acked
	// OnAck, when set, sees every ACKed batch (e.g. to remember its values).
	OnAck func(arrow.RecordBatch)
	// Ledger, when set, files every append's outcome: its position once
	// ACKed, or whether a failure leaves it of unknown outcome or refused.
	Ledger *Ledger
}

// NewProducer returns a producer of table's schema whose ids start at
// firstID; seed drives the other values.
func NewProducer(log Log, table string, schema *arrow.Schema, seed uint64, firstID int64, acked *Acked) (*Producer, error) {
	gen, err := synth.New(schema, seed)
	if err != nil {
		return nil, err
	}
	gen.NextID = firstID
	if acked == nil {
		acked = NewAcked()
	}
	return &Producer{Log: log, Table: table, Gen: gen, Acked: acked}, nil
}

// Append appends one batch of rows records to shard. Its ids are logged
// only when it is ACKed; on an error they are never produced again, and the
// Ledger (if any) says whether the append may be durable all the same.
func (p *Producer) Append(ctx context.Context, shard, rows int) error {
	first := p.Gen.NextID
	b := p.Gen.Batch(rows)
	defer b.Release()
	pos, err := p.Log.Append(ctx, p.Table, shard, b)
	if p.Ledger != nil {
		p.Ledger.Record(shard, Range{first, p.Gen.NextID}, pos, err)
	}
	if err != nil {
		return fmt.Errorf("append to %s shard %d: %w", p.Table, shard, err)
	}
	if p.OnAck != nil {
		p.OnAck(b)
	}
	return p.Acked.Add(b)
}

// Seal seals shard's open generation.
func (p *Producer) Seal(ctx context.Context, shard int) error {
	if _, err := p.Log.Seal(ctx, p.Table, shard); err != nil {
		return fmt.Errorf("seal %s shard %d: %w", p.Table, shard, err)
	}
	return nil
}
