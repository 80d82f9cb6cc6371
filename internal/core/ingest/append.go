package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Request is one producer input to append to one shard of a table.
type Request struct {
	Table     string
	Shard     int
	Data      []byte
	Format    string // FormatAuto, FormatArrow or FormatJSONL
	BatchRows int    // rows per batch when converting JSON lines
	// CallTimeout bounds each WAL call.
	CallTimeout time.Duration
}

// Appended is one ACKed entry.
type Appended struct {
	Position uint64 `json:"position"`
	Rows     int64  `json:"rows"`
}

// Append decodes req.Data with the table's schema and appends each batch as
// one entry, in order, returning the ACKed entries. Nothing is appended
// unless the whole input decodes and matches the schema and the shard
// exists and every batch passes arrowcheck.Batch (errs.ErrInvalid). When an append fails, the entries ACKed before
// it are returned with an error naming them; the failed entry's outcome is
// that of wal.Log.Append (ambiguous when the error wraps
// errs.ErrUnavailable). Cancellation stops before the next append.
func Append(ctx context.Context, log wal.Log, req Request) ([]Appended, error) {
	cctx, cancel := context.WithTimeout(ctx, req.CallTimeout)
	info, err := log.Table(cctx, req.Table)
	cancel()
	if err != nil {
		return nil, err
	}
	if req.Shard < 0 || req.Shard >= info.Shards {
		return nil, fmt.Errorf("table %s has %d shard(s); shard %d does not exist: %w", req.Table, info.Shards, req.Shard, errs.ErrInvalid)
	}
	batches, err := Decode(req.Data, req.Format, info.Schema, req.BatchRows)
	if err != nil {
		return nil, err
	}
	defer Release(batches)
	for i, b := range batches { // the WAL validates each too; this refuses the input before any is ACKed
		if err := arrowcheck.Batch(info.Schema, b); err != nil {
			return nil, fmt.Errorf("batch %d of %d: %w", i+1, len(batches), err)
		}
	}
	out := []Appended{}
	for _, b := range batches {
		cctx, cancel := context.WithTimeout(ctx, req.CallTimeout)
		pos, err := log.Append(cctx, req.Table, req.Shard, b)
		cancel()
		if err != nil {
			last := uint64(0)
			if len(out) > 0 {
				last = out[len(out)-1].Position
			}
			return out, fmt.Errorf("append entry %d of %d (%d already ACKed, last position %d): %w",
				len(out)+1, len(batches), len(out), last, err)
		}
		out = append(out, Appended{Position: pos, Rows: b.NumRows()})
	}
	return out, nil
}
