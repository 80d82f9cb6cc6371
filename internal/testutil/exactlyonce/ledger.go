package exactlyonce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/walctl/walctl/internal/core/errs"
)

// Range is the ids [First, End) of one appended batch (a producer's ids
// are consecutive).
type Range struct{ First, End int64 }

// Len is the number of ids in the range.
func (r Range) Len() int64 { return r.End - r.First }

func (r Range) String() string { return fmt.Sprintf("[%d, %d)", r.First, r.End) }

// Ack is one ACKed append: where the WAL put it and what it held.
type Ack struct {
	Shard int
	Pos   uint64
	IDs   Range
}

// Uncertain reports whether an append that failed with err may be durable
// all the same. wal.Log's contract: only an error after the request may have
// been applied — an unavailable dependency (a lost connection, a call
// deadline, a failed fsync, all errs.ErrUnavailable), a cancelled call or
// a deadline — is of unknown outcome. Every other error (invalid, not found,
// conflict, fenced, corrupt) is a refusal: nothing was appended, so none of
// the batch's ids may ever be in a table.
func Uncertain(err error) bool {
	return errors.Is(err, errs.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Ledger is what producers know of their appends: the ACKed ones with
// their positions, those of unknown outcome and those refused. Safe for
// concurrent use.
type Ledger struct {
	Acked *Acked

	mu        sync.Mutex
	acks      []Ack
	uncertain []Range
	refused   []Range
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{Acked: NewAcked()} }

// Record files the outcome of one append of ids to shard: ACKed at pos when
// err is nil, else uncertain or refused (Uncertain). It reports whether a
// failed append is uncertain. The ACKed ids themselves are logged by the
// producer in Acked, which catches an id ACKed twice.
func (l *Ledger) Record(shard int, ids Range, pos uint64, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acks = append(l.acks, Ack{Shard: shard, Pos: pos, IDs: ids})
		return false
	case Uncertain(err):
		l.uncertain = append(l.uncertain, ids)
		return true
	}
	l.refused = append(l.refused, ids)
	return false
}

// Acks copies the ACKed appends, in the order they were ACKed.
func (l *Ledger) Acks() []Ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acks)
}

// MaxPos is the highest ACKed position of each shard.
func (l *Ledger) MaxPos() map[int]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]uint64{}
	for _, a := range l.acks {
		out[a.Shard] = max(out[a.Shard], a.Pos)
	}
	return out
}

// Uncertains and Refused copy the id ranges of the failed appends.
func (l *Ledger) Uncertains() []Range {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.uncertain)
}

// Refused copies the id ranges of the appends refused outright.
func (l *Ledger) Refused() []Range {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.refused)
}

// Counts are the ledger's figures.
func (l *Ledger) Counts() (acked, uncertain, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks), len(l.uncertain), len(l.refused)
}
