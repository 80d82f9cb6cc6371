// Package ingest turns a producer's input — an Arrow IPC stream or file, or
// JSON lines — into record batches of a table's schema and appends them to
// the WAL, all checked before the first is appended.
package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
)

// Input formats of Decode.
const (
	FormatAuto  = "auto"  // JSON lines when the input starts with '{', else Arrow
	FormatArrow = "arrow" // an Arrow IPC stream, or file (read as the stream it embeds)
	FormatJSONL = "jsonl" // one JSON object per line
)

// Decode reads every batch of data and checks it against schema. JSON lines
// are converted with the schema into batches of batchRows rows. A malformed
// input or a schema mismatch is errs.ErrInvalid and returns no batch; on
// success the caller releases the batches.
func Decode(data []byte, format string, schema *arrow.Schema, batchRows int) ([]arrow.RecordBatch, error) {
	if format == FormatAuto {
		format = FormatArrow
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			format = FormatJSONL
		}
	}
	var out []arrow.RecordBatch
	var err error
	switch {
	case format == FormatJSONL:
		out, err = decodeJSONL(data, schema, batchRows)
	default:
		out, err = decodeStream(data)
	}
	if err == nil && len(out) > 0 && !out[0].Schema().Equal(schema) {
		err = fmt.Errorf("input schema %s differs from the table schema %s: %w", out[0].Schema(), schema, errs.ErrInvalid)
	}
	if err != nil {
		Release(out)
		return nil, err
	}
	return out, nil
}

// Release releases every batch.
func Release(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

// decodeJSONL converts JSON lines; arrow-go's JSON reader panics on some
// malformed lines (`{000000` made it assert a number token to a string,
// found by FuzzDecode), which are refused like any other.
func decodeJSONL(data []byte, schema *arrow.Schema, batchRows int) (out []arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("JSON lines do not match the table schema: %v: %w", p, errs.ErrInvalid)
		}
	}()
	r := array.NewJSONReader(bufio.NewReader(bytes.NewReader(data)), schema, array.WithChunk(batchRows))
	defer r.Release()
	for r.Next() {
		b := r.RecordBatch()
		b.Retain()
		out = append(out, b)
	}
	if err := r.Err(); err != nil {
		return out, fmt.Errorf("JSON lines do not match the table schema: %v: %w", err, errs.ErrInvalid)
	}
	return out, nil
}

// decodeStream reads an IPC stream, or the stream an IPC file embeds, in
// place: lengths the input declares are bounded by the input, and the
// decode allocates at most arrowcheck.DecodeBudget of the input's size
// (compressed bodies included) — arrowcheck.NewStreamReader.
func decodeStream(data []byte) ([]arrow.RecordBatch, error) {
	sr, err := arrowcheck.NewStreamReader(data)
	if err != nil {
		return nil, fmt.Errorf("malformed Arrow IPC stream: %v: %w", err, errs.ErrInvalid)
	}
	defer sr.Release()
	var out []arrow.RecordBatch
	for sr.Next() {
		b := sr.RecordBatch()
		b.Retain()
		out = append(out, b)
	}
	if err := sr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return out, fmt.Errorf("malformed Arrow IPC stream after %d batch(es): %v: %w", len(out), err, errs.ErrInvalid)
	}
	return out, nil
}
