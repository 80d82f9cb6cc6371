package publish

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// prepareHooks let tests observe and perturb preparation: a decode that
// blocks, a stream that fails mid-plan, writers as they start and finish.
type prepareHooks struct {
	// decoding runs while the permit of entry pos of file is held, as part
	// of its fetch/decode (it may block, ignoring ctx, like a decode stuck
	// in I/O).
	decoding func(ctx context.Context, file int, pos uint64)
	// fetched runs after entry pos of file was handed to its writer; an
	// error fails the file's stream.
	fetched func(ctx context.Context, file int, pos uint64) error
	// writerStart and writerDone run when a writer is admitted and when it
	// has finished (its file closed or aborted, its reservations released);
	// writerFreed runs when it gives back its slot, before its file's fsync.
	writerStart func(file int)
	writerFreed func(file int)
	writerDone  func(file int, err error)
	// closing runs when a writer's file is finished and about to be
	// closed (synced, or its last parts uploaded).
	closing func(file int)
}

// fetch streams the entries of j's range, in order, to fn. Each entry is
// fetched and decoded under one of the process's fetch/decode permits and
// then reserved with reserve (its bytes in the budget, or an error: an entry
// that could not fit beside what its writer holds is budget.ErrTooLarge at
// once) before fn sees it; fn takes ownership of the retained record and of
// the n reserved bytes, and must release both (also when it returns an
// error).
//
// On cancellation the decode in flight keeps its permit until the WAL read
// returns; fetch returns only after that, so a permit is never released
// while its decode may still run.
func (s *Session) fetch(ctx context.Context, j fileJob, reserve func(ctx context.Context, n int64, what string) error, fn func(rec arrow.RecordBatch, pos uint64, n int64) error) error {
	permits, hooks := s.p.cfg.Permits, s.p.cfg.hooks
	fr := j.rng
	if err := permits.Acquire(ctx); err != nil {
		return err
	}
	holding := true
	defer func() {
		if holding {
			permits.Release()
		}
	}()
	next := fr.From
	// Every entry is released once written (or on failure), and nothing
	// keeps its memory past that: the engine may recycle read buffers.
	err := s.p.cfg.Cache.Read(wal.RecycleBuffers(ctx), s.p.log, s.table, fr.Shard, fr.From, fr.To, func(e wal.Entry) error {
		if hooks != nil && hooks.decoding != nil {
			hooks.decoding(ctx, j.index, e.Position)
		}
		permits.Release() // the entry is decoded
		holding = false
		if e.Position != next {
			return fmt.Errorf("WAL returned position %d, expected %d: %w", e.Position, next, errs.ErrCorrupt)
		}
		next++
		if j.lin != nil {
			j.lin.add(e.Record)
		}
		n := RecordBytes(e.Record)
		what := fmt.Sprintf("WAL entry %d of shard %d", e.Position, fr.Shard)
		if err := reserve(ctx, n, what); err != nil {
			return err
		}
		e.Record.Retain()
		if err := fn(e.Record, e.Position, n); err != nil {
			return err
		}
		if hooks != nil && hooks.fetched != nil {
			if err := hooks.fetched(ctx, j.index, e.Position); err != nil {
				return err
			}
		}
		if e.Position == fr.To {
			return nil
		}
		if err := permits.Acquire(ctx); err != nil { // for the next decode
			return err
		}
		holding = true
		return nil
	})
	if err != nil {
		return err
	}
	if next != fr.To+1 {
		return fmt.Errorf("WAL ended at position %d, the plan needs %d: %w", next-1, fr.To, errs.ErrCorrupt)
	}
	return nil
}
