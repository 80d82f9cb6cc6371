package wal

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// Encoded is an entry as the engine stores it: the Arrow IPC record batch
// message of a record encoded with its table's schema (no schema message
// of its own). The replicated WAL carries these bytes in its log, so every
// replica stores what the leader encoded without decoding and encoding it
// again.
type Encoded struct {
	Raw []byte
	enc encodedEntry
}

// Release returns the bytes to the engine's pool; Raw must not be used
// afterwards.
func (e Encoded) Release() { e.enc.release() }

// Encode validates rec for the table's shard exactly as Append does (the
// same errors) and returns the bytes Append would store, without writing
// anything.
func (e *Engine) Encode(ctx context.Context, name string, shard int, rec arrow.RecordBatch) (Encoded, error) {
	if err := e.enter(ctx); err != nil {
		return Encoded{}, err
	}
	defer e.life.RUnlock()
	t, _, err := e.shard(name, shard)
	if err != nil {
		return Encoded{}, err
	}
	enc, err := e.encode(name, t, rec)
	if err != nil {
		return Encoded{}, err
	}
	return Encoded{Raw: enc.raw, enc: enc}, nil
}

// AppendEncoded appends entries made by Encode for this table (here or on
// another replica of the same table) to one shard in order, sharing one
// sync, like AppendBatch. Each is checked first — one whole record batch
// message of the table's schema whose arrays pass the ingress validation
// (rule 17), decoded in place without copying — and if one fails
// (ErrSchemaMismatch, ErrBadRange), nothing is written.
func (e *Engine) AppendEncoded(ctx context.Context, name string, shard int, raws [][]byte) ([]uint64, error) {
	if err := e.enter(ctx); err != nil {
		return nil, err
	}
	defer e.life.RUnlock()
	t, s, err := e.shard(name, shard)
	if err != nil {
		return nil, err
	}
	for _, raw := range raws {
		if err := e.checkEncoded(name, t, raw); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(err)
	}
	return s.appendAll(raws)
}

// CheckEncoded tells whether AppendEncoded would accept raw for the shard,
// without writing anything: the same checks, the same errors.
func (e *Engine) CheckEncoded(ctx context.Context, name string, shard int, raw []byte) error {
	if err := e.enter(ctx); err != nil {
		return err
	}
	defer e.life.RUnlock()
	t, _, err := e.shard(name, shard)
	if err != nil {
		return err
	}
	return e.checkEncoded(name, t, raw)
}

func (e *Engine) checkEncoded(name string, t *table, raw []byte) (err error) {
	defer decodeGuard(&err)
	if int64(len(raw)) > e.opts.MaxEntryBytes {
		return fmt.Errorf("table %q: entry of %d bytes exceeds the limit of %d: %w", name, len(raw), e.opts.MaxEntryBytes, ErrBadRange)
	}
	if n, ok := messageLen(raw); !ok || n != len(raw) {
		return fmt.Errorf("table %q: encoded entry of %d bytes is not one Arrow IPC record batch message: %w", name, len(raw), ErrSchemaMismatch)
	}
	rec := decodeInPlace(t.schemaBytes, raw, nil)
	if rec == nil {
		return fmt.Errorf("table %q: encoded entry does not decode as a record batch of the table's schema: %w", name, ErrSchemaMismatch)
	}
	defer rec.Release()
	if err := arrowcheck.Batch(t.schema, rec); err != nil {
		return fmt.Errorf("table %q: %w", name, err)
	}
	return nil
}

// messageLen is the length of the framed record batch message b starts
// with (continuation marker, metadata length, metadata, body), read from
// its framing and metadata alone. It may panic on malformed metadata.
func messageLen(b []byte) (int, bool) {
	msg := framedMessage(b, ipc.MessageRecordBatch, nil)
	if msg == nil {
		return 0, false
	}
	defer msg.Release()
	return 8 + int(int32(binary.LittleEndian.Uint32(b[4:]))) + int(msg.BodyLen()), true
}
