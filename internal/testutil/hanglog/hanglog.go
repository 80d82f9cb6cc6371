// Package hanglog wraps a wal.Log so that tests can make it stop answering:
// served over Arrow Flight (walflight.NewServer), it is a WAL server that
// accepts calls and never answers them, or one whose reads trickle.
package hanglog

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/wal"
)

// Log is a wal.Log that forwards to another until Hang is called; from
// then on every call blocks until its context ends.
type Log struct {
	wal.Log
	hung    atomic.Bool
	readGap atomic.Int64 // nanoseconds between two entries of a read
	calls   atomic.Int64 // calls that blocked
}

// New wraps l.
func New(l wal.Log) *Log { return &Log{Log: l} }

// Hang makes every later call block until its context ends.
func (h *Log) Hang() { h.hung.Store(true) }

// Resume makes calls answer again.
func (h *Log) Resume() { h.hung.Store(false) }

// SetReadGap makes reads wait d before each entry (a slow but live server).
func (h *Log) SetReadGap(d time.Duration) { h.readGap.Store(int64(d)) }

// Blocked counts the calls that hung.
func (h *Log) Blocked() int64 { return h.calls.Load() }

func (h *Log) block(ctx context.Context) error {
	if !h.hung.Load() {
		return nil
	}
	h.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// CreateTable implements wal.Log.
func (h *Log) CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (wal.TableInfo, error) {
	if err := h.block(ctx); err != nil {
		return wal.TableInfo{}, err
	}
	return h.Log.CreateTable(ctx, name, schema, shards)
}

// Table implements wal.Log.
func (h *Log) Table(ctx context.Context, name string) (wal.TableInfo, error) {
	if err := h.block(ctx); err != nil {
		return wal.TableInfo{}, err
	}
	return h.Log.Table(ctx, name)
}

// Tables implements wal.Log.
func (h *Log) Tables(ctx context.Context) ([]wal.TableInfo, error) {
	if err := h.block(ctx); err != nil {
		return nil, err
	}
	return h.Log.Tables(ctx)
}

// Append implements wal.Log.
func (h *Log) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	if err := h.block(ctx); err != nil {
		return 0, err
	}
	return h.Log.Append(ctx, table, shard, rec)
}

// Seal implements wal.Log.
func (h *Log) Seal(ctx context.Context, table string, shard int) (wal.Generation, error) {
	if err := h.block(ctx); err != nil {
		return wal.Generation{}, err
	}
	return h.Log.Seal(ctx, table, shard)
}

// Generations implements wal.Log.
func (h *Log) Generations(ctx context.Context, table string, shard int) ([]wal.Generation, error) {
	if err := h.block(ctx); err != nil {
		return nil, err
	}
	return h.Log.Generations(ctx, table, shard)
}

// Read implements wal.Log; a hang also stops a read between two entries.
func (h *Log) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	if err := h.block(ctx); err != nil {
		return err
	}
	return h.Log.Read(ctx, table, shard, from, to, func(e wal.Entry) error {
		if gap := time.Duration(h.readGap.Load()); gap > 0 {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := h.block(ctx); err != nil {
			return err
		}
		return fn(e)
	})
}

// Epoch implements wal.Log.
func (h *Log) Epoch(ctx context.Context, table string) (uint64, error) {
	if err := h.block(ctx); err != nil {
		return 0, err
	}
	return h.Log.Epoch(ctx, table)
}

// AdvanceEpoch implements wal.Log.
func (h *Log) AdvanceEpoch(ctx context.Context, table string, expect uint64) (uint64, error) {
	if err := h.block(ctx); err != nil {
		return 0, err
	}
	return h.Log.AdvanceEpoch(ctx, table, expect)
}

// Trim implements wal.Log.
func (h *Log) Trim(ctx context.Context, table string, shard int, through, epoch uint64) (uint64, error) {
	if err := h.block(ctx); err != nil {
		return 0, err
	}
	return h.Log.Trim(ctx, table, shard, through, epoch)
}

// Stats implements wal.Log.
func (h *Log) Stats(ctx context.Context, table string, watermarks map[int]uint64) (wal.TableStats, error) {
	if err := h.block(ctx); err != nil {
		return wal.TableStats{}, err
	}
	return h.Log.Stats(ctx, table, watermarks)
}
