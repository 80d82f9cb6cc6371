package arrowchecktest

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// HostileCase is an Arrow IPC stream of a few hundred bytes whose metadata
// or compressed body declares far more memory than the stream holds: a
// decoder that believes it allocates gigabytes (or dies trying).
type HostileCase struct {
	Name string
	// Stream is a schema message, one record batch message and the
	// end-of-stream marker.
	Stream []byte
	// Want is a phrase the refusal must contain.
	Want string
	// Framing is true when what is hostile is a length of the stream's
	// encapsulation, which a Flight message (data header and data body)
	// does not have.
	Framing bool
	// Views is true when what is hostile are the variadic buffer counts
	// of a view column: harmless to a reader of another schema (a WAL
	// entry read with its table's).
	Views bool
}

// Hostile returns the hostile streams: compressed bodies (LZ4 and ZSTD)
// whose buffers declare 1 TiB, ZSTD frames that declare 60 GiB, expand
// from 4 bytes to 128 KiB per block or declare a 512 MiB window, a string
// view column with a huge or negative variadic buffer count or a huge one
// past the end of an empty count vector, and huge declared metadata and
// body lengths.
func Hostile() []HostileCase {
	lz4, zst, view, plain := CompressedInt64s(ipc.WithLZ4()), CompressedInt64s(ipc.WithZstd()), StringViews(), CompressedInt64s()
	rle := zstdRLEFrame(120) // 120 blocks of 128 KiB: 15 MiB from 480 bytes
	return []HostileCase{
		{"lz4-buffer-declares-1TiB", withPrefix(lz4, 1<<40), "uncompressed", false, false},
		{"zstd-buffer-declares-1TiB", withPrefix(zst, 1<<40), "uncompressed", false, false},
		{"zstd-frame-declares-60GiB", replaceBuffer(zst, firstBuffer(zst), prefixed(8, zstdFCSFrame(60<<30))), "ZSTD", false, false},
		{"zstd-rle-bomb-declared", replaceBuffer(zst, firstBuffer(zst), prefixed(120<<17, rle)), "uncompressed", false, false},
		{"zstd-rle-bomb-understated", replaceBuffer(zst, firstBuffer(zst), prefixed(32, rle)), "ZSTD", false, false},
		{"zstd-window-512MiB", replaceBuffer(zst, firstBuffer(zst), prefixed(32, zstdWindowFrame())), "ZSTD", false, false},
		{"zstd-unknown-codec", withCodec(zst, 7), "codec", false, false},
		{"lz4-buffer-shorter-than-its-prefix", replaceBuffer(lz4, firstBuffer(lz4), []byte{1, 2, 3}), "prefix", false, false},
		{"string_view-variadic-count-2^40", withVariadic(view, 1<<40), "variadic", false, true},
		{"string_view-variadic-count-negative", withVariadic(view, -3), "variadic", false, true},
		{"string_view-variadic-count-past-the-vector", withVariadicPastVector(view, 1<<40), "variadic", false, true},
		{"metadata-length-2GiB", append(schemaOf(plain), 0xff, 0xff, 0xff, 0xff, 0xf8, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8), "metadata", true, false},
		{"body-length-1TiB", withBodyLength(plain, 1<<40), "body", true, false},
	}
}

// CompressedInt64s is a stream of one batch of 1,024 rows (i mod 16) of a
// non-nullable int64 column "id", written by arrow-go with opts
// (ipc.WithLZ4(), ipc.WithZstd() or none): the 8 KiB data buffer
// compresses well, so a codec really is applied.
func CompressedInt64s(opts ...ipc.Option) []byte {
	s := Int64Schema()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range 1024 {
		b.Append(int64(i % 16))
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(s, []arrow.Array{col}, 1024)
	defer rec.Release()
	return encodeWith(s, rec, opts...)
}

// Int64Schema is the schema of CompressedInt64s.
func Int64Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
}

// StringViews is a stream of one batch of a string_view column whose
// values do not fit inline: one variadic data buffer.
func StringViews() []byte {
	s := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.StringView}}, nil)
	b := array.NewStringViewBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues([]string{"a value longer than twelve bytes", "short"}, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(s, []arrow.Array{col}, 2)
	defer rec.Release()
	return encodeWith(s, rec)
}

func encodeWith(schema *arrow.Schema, rec arrow.RecordBatch, opts ...ipc.Option) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	if err := w.Write(rec); err != nil {
		panic(fmt.Sprintf("arrowchecktest: encode: %v", err))
	}
	if err := w.Close(); err != nil {
		panic(fmt.Sprintf("arrowchecktest: encode: %v", err))
	}
	return buf.Bytes()
}

// Message is one framed IPC message of a stream: its flatbuffer metadata
// and its body.
type Message struct {
	Meta, Body []byte
}

// Messages splits a stream into its messages (up to the end-of-stream
// marker), as a Flight producer sends them: metadata as the data header,
// body as the data body. The bodies keep the length the metadata declares
// where the stream holds it, else whatever bytes are left.
func Messages(stream []byte) []Message {
	var out []Message
	for at := 0; at+8 <= len(stream); {
		if le.Uint32(stream[at:]) != 0xffffffff {
			break
		}
		n := int(int32(le.Uint32(stream[at+4:])))
		if n <= 0 || at+8+n > len(stream) {
			break
		}
		meta := stream[at+8 : at+8+n]
		rest := stream[at+8+n:]
		body := int(bodyLength(meta))
		if body < 0 || body > len(rest) {
			body = len(rest)
		}
		out = append(out, Message{Meta: meta, Body: rest[:body]})
		at += 8 + n + body
	}
	return out
}

// fbuf reads the few flatbuffer fields the hostile edits patch; positions
// are offsets in b.
type fbuf []byte

func (b fbuf) u32(p int) int { return int(le.Uint32(b[p:])) }

// field is the position of field i of the table at t, or -1.
func (b fbuf) field(t, i int) int {
	vt := t - int(int32(le.Uint32(b[t:])))
	if 4+2*i+2 > int(le.Uint16(b[vt:])) {
		return -1
	}
	off := int(le.Uint16(b[vt+4+2*i:]))
	if off == 0 {
		return -1
	}
	return t + off
}

// ref follows the offset of field i of the table at t, or -1.
func (b fbuf) ref(t, i int) int {
	p := b.field(t, i)
	if p < 0 {
		return -1
	}
	return p + b.u32(p)
}

// recordBatch is the position of a record batch message's RecordBatch
// table (Message field 2, the header).
func (b fbuf) recordBatch() int { return b.ref(b.u32(0), 2) }

// vector returns the position of the first element of the vector of field
// i of the table at t, and its length.
func (b fbuf) vector(t, i int) (int, int) {
	p := b.ref(t, i)
	if p < 0 {
		return -1, 0
	}
	return p + 4, b.u32(p)
}

// bodyLength is the body length meta declares; -1 when meta is too
// broken to tell (a fuzzer's input).
func bodyLength(meta []byte) (n int64) {
	defer func() {
		if recover() != nil {
			n = -1
		}
	}()
	b := fbuf(meta)
	p := b.field(b.u32(0), 3)
	if p < 0 {
		return 0
	}
	return int64(le.Uint64(meta[p:]))
}

// batchAt locates the record batch message of a one-batch stream: the
// offsets of its metadata and of its body in stream.
func batchAt(stream []byte) (meta, body int) {
	schemaLen := int(le.Uint32(stream[4:]))
	meta = 8 + schemaLen + 8
	return meta, meta + int(le.Uint32(stream[8+schemaLen+4:]))
}

func schemaOf(stream []byte) []byte {
	return bytes.Clone(stream[:8+int(le.Uint32(stream[4:]))])
}

// firstBuffer is the index of the batch's first non-empty buffer.
func firstBuffer(stream []byte) int {
	m, _ := batchAt(stream)
	b := fbuf(stream[m:])
	start, n := b.vector(b.recordBatch(), 2)
	for i := 0; i < n; i++ {
		if le.Uint64(b[start+16*i+8:]) > 0 {
			return i
		}
	}
	panic("arrowchecktest: no non-empty buffer")
}

// withPrefix sets the uncompressed length that the first non-empty buffer
// of a compressed batch declares.
func withPrefix(stream []byte, n int64) []byte {
	s := bytes.Clone(stream)
	m, body := batchAt(s)
	b := fbuf(s[m:])
	start, _ := b.vector(b.recordBatch(), 2)
	off := int(le.Uint64(b[start+16*firstBuffer(s):]))
	le.PutUint64(s[body+off:], uint64(n))
	return s
}

// prefixed is a compressed buffer: the uncompressed length n, then data.
func prefixed(n int64, data []byte) []byte {
	return append(le.AppendUint64(nil, uint64(n)), data...)
}

// replaceBuffer gives buffer i of the batch the content data, appended to
// the body; the metadata's buffer entry and body length follow.
func replaceBuffer(stream []byte, i int, data []byte) []byte {
	m, body := batchAt(stream)
	meta := fbuf(bytes.Clone(stream[m:body]))
	oldLen := bodyLength(meta)
	newBody := append(bytes.Clone(stream[body:body+int(oldLen)]), data...)
	for len(newBody)%8 != 0 {
		newBody = append(newBody, 0)
	}
	start, _ := meta.vector(meta.recordBatch(), 2)
	le.PutUint64(meta[start+16*i:], uint64(oldLen))
	le.PutUint64(meta[start+16*i+8:], uint64(len(data)))
	le.PutUint64(meta[meta.field(meta.u32(0), 3):], uint64(len(newBody)))
	out := append(bytes.Clone(stream[:m]), meta...)
	out = append(out, newBody...)
	return append(out, eos...)
}

var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// withBodyLength sets the body length the batch message declares.
func withBodyLength(stream []byte, n int64) []byte {
	s := bytes.Clone(stream)
	m, _ := batchAt(s)
	b := fbuf(s[m:])
	le.PutUint64(b[b.field(b.u32(0), 3):], uint64(n))
	return s
}

// withVariadic sets the batch's first variadic buffer count.
func withVariadic(stream []byte, n int64) []byte {
	s := bytes.Clone(stream)
	m, _ := batchAt(s)
	b := fbuf(s[m:])
	start, cnt := b.vector(b.recordBatch(), 4)
	if cnt == 0 {
		panic("arrowchecktest: no variadic buffer counts")
	}
	le.PutUint64(b[start:], uint64(n))
	return s
}

// withVariadicPastVector empties the batch's vector of variadic buffer
// counts and leaves n where its first count was: a reader that does not
// check the vector's length reads n for the view column.
func withVariadicPastVector(stream []byte, n int64) []byte {
	s := withVariadic(stream, n)
	m, _ := batchAt(s)
	b := fbuf(s[m:])
	start, _ := b.vector(b.recordBatch(), 4)
	le.PutUint32(b[start-4:], 0)
	return s
}

// withCodec sets the compression codec of a ZSTD batch (LZ4's is the
// flatbuffer default, not stored).
func withCodec(stream []byte, codec byte) []byte {
	s := bytes.Clone(stream)
	m, _ := batchAt(s)
	b := fbuf(s[m:])
	p := b.field(b.ref(b.recordBatch(), 3), 0)
	if p < 0 {
		panic("arrowchecktest: no codec field")
	}
	b[p] = codec
	return s
}

// zstdFCSFrame is the start of a ZSTD frame that declares a content size
// of n bytes (and a 1 MiB window), then one empty raw block.
func zstdFCSFrame(n uint64) []byte {
	f := le.AppendUint32(nil, 0xFD2FB528)
	f = append(f, 0xC0, 0x50) // FCS of 8 bytes, not single-segment; window 1 MiB
	f = le.AppendUint64(f, n)
	return append(f, 0x01, 0x00, 0x00) // last block, raw, size 0
}

// zstdWindowFrame is a ZSTD frame that declares a 512 MiB window (the
// most a default decoder accepts), then one RLE block of 128 KiB.
func zstdWindowFrame() []byte {
	f := le.AppendUint32(nil, 0xFD2FB528)
	f = append(f, 0x00, 19<<3) // no content size; window 2^(10+19)
	h := uint32(1) | uint32(1)<<1 | uint32(128<<10)<<3
	return append(f, byte(h), byte(h>>8), byte(h>>16), 'x')
}

// zstdRLEFrame is a ZSTD frame of blocks RLE blocks of 128 KiB each, 4
// bytes a block, no content size declared.
func zstdRLEFrame(blocks int) []byte {
	f := le.AppendUint32(nil, 0xFD2FB528)
	f = append(f, 0x00, 0x50) // no content size; window 1 MiB
	for i := 0; i < blocks; i++ {
		h := uint32(1)<<1 | uint32(128<<10)<<3 // RLE, 128 KiB
		if i == blocks-1 {
			h |= 1
		}
		f = append(f, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	return f
}
