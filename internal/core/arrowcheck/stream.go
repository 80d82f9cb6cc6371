package arrowcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// NewStreamReader returns an Arrow IPC stream reader over data that never
// allocates what a message merely declares: each message's metadata and
// body are slices of data (no copy), and a length running past the end of
// data is an error. arrow-go's ipc.NewReader allocates the declared
// metadata length before reading it, so 8 bytes of input could make it
// allocate 2 GiB (found by FuzzBatch). The batches it returns point into
// data, which must not be modified while they are in use.
//
// An Arrow IPC file ("ARROW1" magic) is read as the stream it embeds; its
// footer, which repeats the schema and indexes the batches, is not read.
// Each message passes a Stream first (metadata verified, view columns'
// variadic buffer counts checked against the schema, compressed bodies
// decompressed within the budget). The whole decode allocates at
// most DecodeBudget(len(data)); the reader's own allocator option, if any
// in opts, is replaced by that bounded one.
func NewStreamReader(data []byte, opts ...ipc.Option) (*ipc.Reader, error) {
	return NewBoundedStreamReader(data, NewAllocator(DecodeBudget(len(data))), opts...)
}

// NewBoundedStreamReader is NewStreamReader allocating from alloc, for a
// caller with a budget of its own (the WAL's entries).
func NewBoundedStreamReader(data []byte, alloc *Allocator, opts ...ipc.Option) (*ipc.Reader, error) {
	if bytes.HasPrefix(data, fileMagic) && len(data) >= 8 {
		data = data[8:] // magic, padded to 8 bytes
	}
	return ipc.NewReaderFromMessageReader(&sliceReader{data: data, stream: NewStream(alloc)}, append(opts, ipc.WithAllocator(alloc))...)
}

var fileMagic = []byte("ARROW1")

// sliceReader is an ipc.MessageReader over a stream held in memory.
type sliceReader struct {
	data   []byte
	pos    int
	stream *Stream
	refs   atomic.Int64
	msg    *ipc.Message
}

func (r *sliceReader) Retain() { r.refs.Add(1) }

func (r *sliceReader) Release() {
	if r.refs.Add(-1) <= 0 && r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
}

// Message returns the next message; io.EOF at the end-of-stream marker or
// the end of data.
func (r *sliceReader) Message() (msg *ipc.Message, err error) {
	defer func() {
		if p := recover(); p != nil { // metadata that is not a flatbuffer Message
			msg, err = nil, fmt.Errorf("arrow/ipc: invalid message metadata at byte %d: %v", r.pos, p)
		}
	}()
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	rest := r.data[r.pos:]
	if len(rest) == 0 {
		return nil, io.EOF
	}
	le := binary.LittleEndian
	hdr := 4
	if len(rest) < 4 {
		return nil, fmt.Errorf("arrow/ipc: %d stray bytes at byte %d: %w", len(rest), r.pos, io.ErrUnexpectedEOF)
	}
	n := int64(le.Uint32(rest))
	if n == 0xffffffff { // continuation marker, then the length
		if len(rest) < 8 {
			return nil, fmt.Errorf("arrow/ipc: truncated message header at byte %d: %w", r.pos, io.ErrUnexpectedEOF)
		}
		n, hdr = int64(int32(le.Uint32(rest[4:]))), 8
	}
	if n == 0 {
		return nil, io.EOF // end-of-stream marker
	}
	if n < 0 || n > int64(len(rest)-hdr) {
		return nil, fmt.Errorf("arrow/ipc: message at byte %d declares %d bytes of metadata, %d bytes are left: %w",
			r.pos, n, len(rest)-hdr, io.ErrUnexpectedEOF)
	}
	meta := rest[hdr : hdr+int(n)]
	if err := VerifyMetadata(meta); err != nil {
		return nil, fmt.Errorf("arrow/ipc: message at byte %d: %w", r.pos, err)
	}
	probe := ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen()
	probe.Release()
	left := int64(len(rest) - hdr - int(n))
	if bodyLen < 0 || bodyLen > left {
		return nil, fmt.Errorf("arrow/ipc: message at byte %d declares a body of %d bytes, %d bytes are left: %w",
			r.pos, bodyLen, left, io.ErrUnexpectedEOF)
	}
	body := rest[hdr+int(n) : hdr+int(n)+int(bodyLen)]
	if r.msg, err = r.stream.Message(meta, memory.NewBufferBytes(body)); err != nil {
		return nil, fmt.Errorf("arrow/ipc: message at byte %d: %w", r.pos, err)
	}
	r.pos += hdr + int(n) + int(bodyLen)
	return r.msg, nil
}
