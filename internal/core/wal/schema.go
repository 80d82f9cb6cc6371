package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// eos is the Arrow IPC end-of-stream marker written when a generation is
// sealed.
var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// EncodeSchema returns the Arrow IPC stream encoding of schema's schema
// message (no record batches, no end-of-stream marker). It is the prefix of
// every generation file of a table with that schema.
func EncodeSchema(schema *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	b := buf.Bytes()
	if !bytes.HasSuffix(b, eos) {
		return nil, fmt.Errorf("encode schema: stream does not end with an end-of-stream marker")
	}
	return b[:len(b)-len(eos)], nil
}

// DecodeSchema parses bytes produced by EncodeSchema (or any Arrow IPC
// stream) and returns its schema. Malformed input wraps errs.ErrInvalid.
func DecodeSchema(b []byte) (_ *arrow.Schema, err error) {
	defer decodeGuard(&err)
	r, err := arrowcheck.NewBoundedStreamReader(b, entryAllocator(len(b))) // bounds what hostile metadata declares
	if err != nil {
		return nil, fmt.Errorf("decode Arrow IPC schema: %v: %w", err, ErrSchemaMismatch)
	}
	defer r.Release()
	return r.Schema(), nil
}

// schemaDiff names the first difference between a table's schema and
// another, or returns "" when they agree on field names, types and
// nullability (metadata is ignored).
func schemaDiff(want, got *arrow.Schema) string {
	wf, gf := want.Fields(), got.Fields()
	for i := 0; i < len(wf) && i < len(gf); i++ {
		w, g := wf[i], gf[i]
		switch {
		case w.Name != g.Name:
			return fmt.Sprintf("field %d is %q, want %q", i, g.Name, w.Name)
		case !arrow.TypeEqual(w.Type, g.Type):
			return fmt.Sprintf("field %q has type %s, want %s", w.Name, g.Type, w.Type)
		case w.Nullable != g.Nullable:
			return fmt.Sprintf("field %q has nullable=%t, want %t", w.Name, g.Nullable, w.Nullable)
		}
	}
	if len(gf) > len(wf) {
		return fmt.Sprintf("unexpected field %q (table has %d fields)", gf[len(wf)].Name, len(wf))
	}
	if len(gf) < len(wf) {
		return fmt.Sprintf("missing field %q", wf[len(gf)].Name)
	}
	return ""
}

// checkSchemaSupported refuses schemas the WAL cannot store entry by entry.
func checkSchemaSupported(s *arrow.Schema) error {
	if s == nil || len(s.Fields()) == 0 {
		return fmt.Errorf("schema has no fields: %w", ErrSchemaMismatch)
	}
	if err := arrowcheck.Schema(s); err != nil {
		return err // arrowcheck.ErrBadSchema, naming the field
	}
	for _, f := range s.Fields() {
		if hasDictionary(f.Type) {
			return fmt.Errorf("field %q is dictionary-encoded, which the WAL does not store: %w", f.Name, ErrSchemaMismatch)
		}
	}
	return nil
}

func hasDictionary(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return true
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if hasDictionary(f.Type) {
				return true
			}
		}
	}
	return false
}

// encodeBufs recycles encoding buffers: without it every append allocates
// and zeroes a buffer the size of its entry.
var encodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf keeps unusually large buffers out of the pool.
const maxPooledBuf = 64 << 20

// encodedEntry is an entry's stored bytes in a pooled buffer.
type encodedEntry struct {
	raw []byte
	buf *bytes.Buffer
}

// release returns the buffer to the pool; raw must not be used afterwards.
func (e encodedEntry) release() {
	if e.buf != nil && e.buf.Cap() <= maxPooledBuf {
		encodeBufs.Put(e.buf)
	}
}

// encodeEntry validates rec against the table schema and returns its Arrow
// IPC record batch message, the bytes stored for the entry.
func encodeEntry(table string, schema *arrow.Schema, schemaBytes []byte, rec arrow.RecordBatch) (encodedEntry, error) {
	if rec == nil {
		return encodedEntry{}, fmt.Errorf("table %q: nil record batch: %w", table, ErrSchemaMismatch)
	}
	if d := schemaDiff(schema, rec.Schema()); d != "" {
		return encodedEntry{}, fmt.Errorf("table %q: record batch %s: %w", table, d, ErrSchemaMismatch)
	}
	// Rule 17: every ingress (in-process, Flight DoPut, wal load) passes
	// here before its entry is written.
	if err := arrowcheck.Batch(schema, rec); err != nil {
		return encodedEntry{}, fmt.Errorf("table %q: %w", table, err)
	}
	// Rewrap with the table's schema so schema metadata differences do not
	// matter: the stored message carries no schema of its own.
	r := array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
	defer r.Release()
	buf := encodeBufs.Get().(*bytes.Buffer)
	buf.Reset()
	buf.Grow(len(schemaBytes) + estimateSize(r) + 1024)
	w := ipc.NewWriter(buf, ipc.WithSchema(schema))
	if err := w.Write(r); err != nil {
		return encodedEntry{}, fmt.Errorf("table %q: encode record batch: %v: %w", table, err, ErrSchemaMismatch)
	}
	b := buf.Bytes()
	if !bytes.HasPrefix(b, schemaBytes) {
		return encodedEntry{}, fmt.Errorf("table %q: encoded stream does not start with the table schema", table)
	}
	return encodedEntry{raw: b[len(schemaBytes):], buf: buf}, nil
}

// decodeEntry decodes a stored record batch message with the table schema.
func decodeEntry(schemaBytes, raw []byte) (_ arrow.RecordBatch, err error) {
	defer decodeGuard(&err)
	stream := make([]byte, 0, len(schemaBytes)+len(raw))
	stream = append(append(stream, schemaBytes...), raw...)
	r, err := arrowcheck.NewBoundedStreamReader(stream, entryAllocator(len(stream))) // bounds what hostile metadata declares
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		if r.Err() != nil {
			return nil, r.Err()
		}
		return nil, fmt.Errorf("no record batch in entry")
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// estimateSize approximates the encoded size of rec's buffers, to size the
// encoding buffer once.
func estimateSize(rec arrow.RecordBatch) int {
	n := 0
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += b.Len() + 8
			}
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	for _, c := range rec.Columns() {
		walk(c.Data())
	}
	return n
}

// decodeEntryOwned decodes a stored record batch message like decodeEntry,
// but without copying its body: the record's buffers point into raw, which
// the caller hands over (it must not be reused or modified afterwards). A
// message it cannot take apart this way (a framing it does not expect, or
// anything but one record batch) is decoded by decodeEntry instead, which
// also reports any damage.
//
// With put, raw is a recycled buffer (readBuffer): put is called once the
// record and every array sliced from it are released — or as soon as
// decoding is over, when the record does not point into raw.
func decodeEntryOwned(schemaBytes, raw []byte, put func()) (arrow.RecordBatch, error) {
	var own *memory.Buffer
	if put != nil {
		// This reference holds raw until decoding is over; the in-place
		// record's body is a slice of own and holds it as long as it lives.
		own = memory.NewBufferWithAllocator(raw, recycler{put})
		defer own.Release()
	}
	if rec := decodeInPlace(schemaBytes, raw, own); rec != nil {
		return rec, nil
	}
	return decodeEntry(schemaBytes, raw)
}

// decodeInPlace is decodeEntryOwned's fast path; nil means "use decodeEntry".
func decodeInPlace(schemaBytes, raw []byte, own *memory.Buffer) (rec arrow.RecordBatch) {
	defer func() {
		if recover() != nil { // malformed metadata: let decodeEntry report it
			rec = nil
		}
	}()
	schemaMsg := framedMessage(schemaBytes, ipc.MessageSchema, nil)
	if schemaMsg == nil {
		return nil
	}
	defer schemaMsg.Release()
	meta, body := framedParts(raw, ipc.MessageRecordBatch, own)
	if meta == nil {
		return nil
	}
	alloc := entryAllocator(len(raw))
	batchMsg, err := arrowcheck.NewMessage(meta.Bytes(), body, alloc) // verified; a compressed body within the budget
	body.Release()                                                    // the message holds it
	if err != nil {
		return nil
	}
	defer batchMsg.Release()
	mr := &sliceMessages{msgs: []*ipc.Message{schemaMsg, batchMsg}}
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(alloc))
	if err != nil {
		return nil
	}
	defer r.Release()
	if !r.Next() {
		return nil
	}
	rec = r.RecordBatch()
	rec.Retain()
	return rec
}

// framedMessage returns the IPC message of type want that b starts with
// (continuation marker, metadata length, metadata, body), its body a slice
// of b (of own, which holds b's bytes, when given), or nil.
func framedMessage(b []byte, want ipc.MessageType, own *memory.Buffer) *ipc.Message {
	meta, body := framedParts(b, want, own)
	if meta == nil {
		return nil
	}
	defer body.Release() // the message holds it
	return ipc.NewMessage(meta, body)
}

// framedParts returns framedMessage's metadata and body (nil, nil: none);
// the caller releases body.
func framedParts(b []byte, want ipc.MessageType, own *memory.Buffer) (meta, body *memory.Buffer) {
	if len(b) < 8 || binary.LittleEndian.Uint32(b) != 0xffffffff {
		return nil, nil
	}
	n := int64(int32(binary.LittleEndian.Uint32(b[4:])))
	if n < 4 || 8+n > int64(len(b)) {
		return nil, nil
	}
	meta = memory.NewBufferBytes(b[8 : 8+n])
	rest := b[8+n:]
	probe := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	typ, bodyLen := probe.Type(), probe.BodyLen()
	probe.Release()
	if typ != want || bodyLen < 0 || bodyLen > int64(len(rest)) {
		return nil, nil
	}
	if own == nil {
		return meta, memory.NewBufferBytes(rest[:bodyLen])
	}
	return meta, memory.SliceBuffer(own, int(8+n), int(bodyLen))
}

// sliceMessages is an ipc.MessageReader over messages already in memory.
type sliceMessages struct {
	msgs []*ipc.Message
	refs atomic.Int64
}

func (s *sliceMessages) Message() (*ipc.Message, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func (s *sliceMessages) Retain()  { s.refs.Add(1) }
func (s *sliceMessages) Release() { s.refs.Add(-1) }
