package arrowcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// NewMessage returns the message arrow-go's IPC reader should decode for
// metadata meta and body received from outside, never allocating what
// they merely declare. The metadata passes VerifyMetadata (which also
// bounds view columns' variadic buffer counts by the buffers present).
// An uncompressed message is returned as it is, sharing body. A stream's
// messages go through a Stream instead, which also knows the stream's
// schema; NewMessage alone suits a message whose schema has no view
// column (a WAL entry of a table).
//
// A compressed record or dictionary batch is decompressed here, not by
// arrow-go, whose decoders allocate what a buffer's length prefix or a
// ZSTD frame header declares (up to 64 GiB) and let a ZSTD window or RLE
// blocks expand a few bytes to hundreds of MiB. Every buffer must lie in
// the body; the lengths they declare must together fit what is left of
// alloc's budget and MaxDecodeBytes before anything is allocated; each
// must decompress to exactly its declared length with a decoder that
// cannot write past it. The message returned holds the decompressed
// buffers, each marked uncompressed (length prefix -1), which arrow-go
// then slices without allocating. Errors wrap ErrMalformed.
func NewMessage(meta []byte, body *memory.Buffer, alloc *Allocator) (*ipc.Message, error) {
	if err := VerifyMetadata(meta); err != nil {
		return nil, err
	}
	l, err := layoutOf(meta)
	if err != nil {
		return nil, fmt.Errorf("Arrow IPC message metadata: %v: %w", err, ErrMalformed)
	}
	return newMessage(meta, body, l, alloc)
}

func newMessage(meta []byte, body *memory.Buffer, l layout, alloc *Allocator) (*ipc.Message, error) {
	if l.codec < 0 {
		return ipc.NewMessage(memory.NewBufferBytes(meta), body), nil
	}
	meta, raw, err := decompress(meta, body.Bytes(), l, alloc)
	if err != nil {
		return nil, fmt.Errorf("compressed Arrow IPC body: %v: %w", err, ErrMalformed)
	}
	return ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(raw)), nil
}

// Compression codecs (flatbuffer CompressionType).
const (
	codecLZ4  = 0
	codecZSTD = 1
)

var codecNames = map[int]string{codecLZ4: "LZ4", codecZSTD: "ZSTD"}

// Message header types (flatbuffer MessageHeader).
const (
	headerSchema     = 1
	headerDictionary = 2
	headerBatch      = 3
)

// layout locates, in verified metadata, what NewMessage and Stream read
// and what decompress rewrites.
type layout struct {
	typ        byte  // header type
	dictID     int64 // of a dictionary batch
	variadic   int   // variadic buffer counts of a batch; -1: none stored
	codec      int   // -1: not a compressed batch
	bufs, nbuf int   // position of the buffer vector's first struct, count
	bodyLen    int   // position of Message.bodyLength (0: absent)
}

// layoutOf reads the layout of a message.
func layoutOf(meta []byte) (layout, error) {
	v := &verifier{b: meta}
	l := layout{variadic: -1, codec: -1}
	root, _ := v.u32(0)
	m, err := v.table(root)
	if err != nil {
		return l, err
	}
	tp, err := v.field(m, 1, 1)
	if err != nil || tp == 0 {
		return l, err
	}
	l.typ = v.b[tp]
	rb, ok, err := v.sub(m, 2)
	if err != nil || !ok {
		return l, err
	}
	switch l.typ {
	case headerDictionary: // DictionaryBatch: 0 id, 1 data
		if p, err := v.field(rb, 0, 8); err != nil {
			return l, err
		} else if p != 0 {
			l.dictID = int64(le.Uint64(v.b[p:]))
		}
		if rb, ok, err = v.sub(rb, 1); err != nil || !ok {
			return l, err
		}
	case headerBatch:
	default:
		return l, nil
	}
	if p, err := v.ref(rb, 4); err != nil {
		return l, err
	} else if p != 0 {
		_, l.variadic, err = v.vector(rb, 4, 8)
		if err != nil {
			return l, err
		}
	}
	comp, ok, err := v.sub(rb, 3)
	if err != nil || !ok {
		return l, err
	}
	// BodyCompression: 0 codec (default LZ4_FRAME), 1 method (BUFFER)
	l.codec = codecLZ4
	if p, err := v.field(comp, 0, 1); err != nil {
		return l, err
	} else if p != 0 {
		l.codec = int(int8(v.b[p]))
	}
	if _, ok := codecNames[l.codec]; !ok {
		return l, fmt.Errorf("unknown compression codec %d", l.codec)
	}
	if p, err := v.field(comp, 1, 1); err != nil {
		return l, err
	} else if p != 0 && v.b[p] != 0 {
		return l, fmt.Errorf("unknown body compression method %d", v.b[p])
	}
	if l.bufs, l.nbuf, err = v.vector(rb, 2, 16); err != nil {
		return l, err
	}
	l.bodyLen, err = v.field(m, 3, 8)
	return l, err
}

// decompress returns a copy of meta and a new body in which every buffer
// of the batch is decompressed and marked uncompressed.
func decompress(meta, body []byte, bl layout, alloc *Allocator) ([]byte, []byte, error) {
	type part struct {
		set  bool   // the buffer is not empty
		data []byte // compressed, or raw when size < 0
		size int64  // declared uncompressed length; -1: stored raw
	}
	parts := make([]part, bl.nbuf)
	var total int64 // bytes of the new body
	for i := range parts {
		off, n := int64(le.Uint64(meta[bl.bufs+16*i:])), int64(le.Uint64(meta[bl.bufs+16*i+8:]))
		if n == 0 {
			continue
		}
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			return nil, nil, fmt.Errorf("buffer %d (offset %d, %d bytes) lies outside the %d-byte body", i, off, n, len(body))
		}
		if n < 8 {
			return nil, nil, fmt.Errorf("buffer %d of %d bytes is shorter than its 8-byte length prefix", i, n)
		}
		p := part{set: true, data: body[off+8 : off+n], size: int64(le.Uint64(body[off:]))}
		size := p.size
		if size == -1 {
			size = n - 8
		} else if size < 0 {
			return nil, nil, fmt.Errorf("buffer %d declares %d uncompressed bytes", i, size)
		}
		if size > MaxDecodeBytes-total || size > alloc.Left()-total {
			return nil, nil, fmt.Errorf("buffer %d declares %d uncompressed bytes, the buffers before it %d: more than the %d bytes the input may decompress to (%d× its size plus %d, at most %d a message)",
				i, size, total, min(alloc.Left(), MaxDecodeBytes), DecodeRatio, DecodeSlack, MaxDecodeBytes)
		}
		parts[i] = p
		total += 8 + (size+7)&^7
	}
	if err := alloc.Take(int(total)); err != nil {
		return nil, nil, err
	}
	out := make([]byte, total)
	meta = bytes.Clone(meta)
	at := int64(0)
	for i, p := range parts {
		if !p.set {
			le.PutUint64(meta[bl.bufs+16*i:], 0)
			le.PutUint64(meta[bl.bufs+16*i+8:], 0)
			continue
		}
		le.PutUint64(out[at:], ^uint64(0)) // -1: uncompressed
		dst := out[at+8 : at+8]
		if p.size == -1 {
			dst = append(dst, p.data...)
		} else if p.size > 0 { // nothing to read for 0, as arrow-go reads nothing
			got, err := decode(bl.codec, p.data, dst[:0:p.size])
			if err != nil {
				return nil, nil, fmt.Errorf("buffer %d: %s data does not decompress to its declared %d bytes: %v", i, codecNames[bl.codec], p.size, err)
			}
			dst = append(dst, got...) // in place, unless a decoder had to grow its output
		}
		le.PutUint64(meta[bl.bufs+16*i:], uint64(at))
		le.PutUint64(meta[bl.bufs+16*i+8:], uint64(8+len(dst)))
		at += 8 + (int64(len(dst))+7)&^7
	}
	if bl.bodyLen != 0 {
		le.PutUint64(meta[bl.bodyLen:], uint64(total))
	}
	return meta, out, nil
}

// decode decompresses src into dst (len 0), which must end up exactly
// full: the decoders never write past cap(dst) nor allocate for output.
func decode(codec int, src, dst []byte) ([]byte, error) {
	want := cap(dst)
	var err error
	switch codec {
	case codecZSTD:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		dst, err = d.DecodeAll(src, dst)
	default:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		var n int
		n, err = io.ReadFull(r, dst[:want])
		dst = dst[:n]
		if err == nil {
			var one [1]byte
			if m, rerr := r.Read(one[:]); m > 0 {
				err = errors.New("more data than declared")
			} else if rerr != io.EOF {
				err = rerr
			}
		}
		r.Reset(nil)
	}
	if err == nil && len(dst) != want {
		err = fmt.Errorf("%d bytes decompressed", len(dst))
	}
	return dst, err
}

// Decoders are reused: a ZSTD decoder costs more to set up than a small
// buffer takes to decode. DecodeAll with the cap limit writes only into
// dst, never past its capacity; the window and the decoded size are
// bounded by MaxDecodeBytes besides.
var (
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxMemory(MaxDecodeBytes),
			zstd.WithDecoderMaxWindow(MaxDecodeBytes))
		if err != nil {
			panic(err) // only for invalid options
		}
		return d
	}}
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)
