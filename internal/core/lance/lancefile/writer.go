package lancefile

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// Magic ends every Lance file.
const Magic = "LANC"

// FooterLen is the size of the fixed v2 file footer.
const FooterLen = 40

const alignment = 64

// DefaultMaxPageBytes bounds the data of one page; a batch whose column is
// larger is split into several pages.
const DefaultMaxPageBytes = 8 << 20

// Version is a Lance data-file format version.
type Version int

const (
	// V2_0 is file format 2.0: each page is a tree of "array encodings"
	// (flat buffers, a validity bitmap for nulls, offsets for binary). It is
	// walctl's default for the tables it creates: pages are the Arrow
	// buffers themselves (zero copy for fixed-width columns, one offset
	// rewrite for variable width), nulls need no definition levels, every
	// Lance reader since 0.15 opens it, and an official writer appending to
	// a 2.0 table mostly writes plain pages walctl reads back, where in 2.1
	// it bit-packs integers and definition levels and FSST-compresses
	// strings in all but the smallest pages, which walctl does not decode.
	// Uncompressed 2.1 is hardly smaller than 2.0 and, measured with
	// lancebench, about as fast to write, so it offers walctl's own tables
	// nothing to make up for that.
	V2_0 Version = iota
	// V2_1 is file format 2.1 (structural pages: mini-block chunks for
	// narrow values, full-zip for wide ones, definition levels for nulls),
	// the official writer's default. walctl writes it uncompressed and
	// reads back the uncompressed layouts; compressed pages of the official
	// writer are refused with ErrUnsupported.
	V2_1
)

// FooterNumbers returns the (major, minor) numbers stored in the footer.
func (v Version) FooterNumbers() (uint16, uint16) {
	if v == V2_1 {
		return 2, 1
	}
	return 0, 3
}

// ManifestNumbers returns the (major, minor) numbers a manifest's DataFile
// records for files of this version.
func (v Version) ManifestNumbers() (uint32, uint32) {
	if v == V2_1 {
		return 2, 1
	}
	return 2, 0
}

// String returns the version as the manifest's data_format spells it.
func (v Version) String() string {
	if v == V2_1 {
		return "2.1"
	}
	return "2.0"
}

// ParseVersion parses "2.0" or "2.1" (also the footer pair "0.3").
func ParseVersion(s string) (Version, error) {
	switch s {
	case "2.0", "0.3":
		return V2_0, nil
	case "2.1":
		return V2_1, nil
	}
	return 0, fmt.Errorf("lance file format %q (walctl writes 2.0 and 2.1): %w", s, errs.ErrInvalid)
}

// VersionFromFooter maps footer numbers to a Version.
func VersionFromFooter(major, minor uint16) (Version, error) {
	switch {
	case major == 0 && minor == 3, major == 2 && minor == 0:
		return V2_0, nil
	case major == 2 && minor == 1:
		return V2_1, nil
	}
	return 0, fmt.Errorf("lance file version %d.%d: %w", major, minor, errs.ErrInvalid)
}

// Options configure a Writer.
type Options struct {
	Version      Version
	MaxPageBytes int
}

// Writer streams Arrow record batches into one Lance data file. Pages are
// written as batches arrive; only the small per-page metadata stays in
// memory until Finish writes the footer.
type Writer struct {
	out    io.Writer
	pos    uint64
	schema *Schema
	opts   Options
	cols   []lancepb.ColumnMetadata
	rows   uint64
	// scratch holds offsets, definition levels and realigned bitmaps of the
	// page being encoded; meta the chunk metadata of a 2.1 mini-block page.
	scratch   []byte
	meta      []byte
	workspace int
	err       error
	finished  bool
}

// NewWriter returns a Writer that writes a file of the given schema to out.
func NewWriter(out io.Writer, schema *Schema, opts Options) (*Writer, error) {
	if opts.MaxPageBytes <= 0 {
		opts.MaxPageBytes = DefaultMaxPageBytes
	}
	switch opts.Version {
	case V2_0, V2_1:
	default:
		return nil, fmt.Errorf("file version %d: %w", opts.Version, errs.ErrInvalid)
	}
	return &Writer{out: out, schema: schema, opts: opts, cols: make([]lancepb.ColumnMetadata, len(schema.Fields))}, nil
}

// Rows returns the number of rows written so far.
func (w *Writer) Rows() uint64 { return w.rows }

// WorkspaceBytes returns the largest encoder workspace used so far (offset
// rewrites, realigned bitmaps, mini-block chunks), not counting the caller's
// batches or any output buffering.
func (w *Writer) WorkspaceBytes() int { return w.workspace }

func (w *Writer) grow(n int) []byte {
	if cap(w.scratch) < n {
		w.scratch = make([]byte, n)
		if n > w.workspace {
			w.workspace = n
		}
	}
	return w.scratch[:n]
}

var padding [alignment]byte

// writeBuffer writes b padded to the 64-byte alignment and returns its offset.
func (w *Writer) writeBuffer(b ...[]byte) (uint64, uint64, error) {
	off := w.pos
	var size uint64
	for _, part := range b {
		if _, err := w.out.Write(part); err != nil {
			return 0, 0, err
		}
		size += uint64(len(part))
	}
	w.pos += size
	if pad := (alignment - w.pos%alignment) % alignment; pad != 0 {
		if _, err := w.out.Write(padding[:pad]); err != nil {
			return 0, 0, err
		}
		w.pos += pad
	}
	return off, size, nil
}

// checkRecord refuses a batch whose schema does not match the file's.
func (w *Writer) checkRecord(rec arrow.Record) error {
	if int(rec.NumCols()) != len(w.schema.Fields) {
		return fmt.Errorf("batch has %d columns, file schema has %d: %w", rec.NumCols(), len(w.schema.Fields), errs.ErrInvalid)
	}
	for i, f := range w.schema.Arrow.Fields() {
		col := rec.Column(i)
		if !arrow.TypeEqual(col.DataType(), f.Type) {
			return fmt.Errorf("column %q: batch type %s, file type %s: %w", f.Name, col.DataType(), f.Type, errs.ErrInvalid)
		}
		if !f.Nullable && col.NullN() > 0 {
			return fmt.Errorf("column %q is not nullable but the batch has %d nulls: %w", f.Name, col.NullN(), errs.ErrInvalid)
		}
	}
	return nil
}

// Write appends one record batch. After an error the writer is unusable.
func (w *Writer) Write(rec arrow.Record) error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return fmt.Errorf("write after finish: %w", errs.ErrInvalid)
	}
	if err := w.checkRecord(rec); err != nil {
		return err // the file is still consistent: nothing of rec was written
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	for i := range w.schema.Fields {
		if err := w.writeColumn(i, rec.Column(i)); err != nil {
			w.err = err
			return err
		}
	}
	w.rows += uint64(n)
	return nil
}

func (w *Writer) writeColumn(col int, arr arrow.Array) error {
	n := arr.Len()
	size := columnBytes(arr)
	pages := 1
	if size > w.opts.MaxPageBytes {
		pages = (size + w.opts.MaxPageBytes - 1) / w.opts.MaxPageBytes
	}
	per := (n + pages - 1) / pages
	for start := 0; start < n; start += per {
		m := min(per, n-start)
		page := w.page20
		if w.opts.Version == V2_1 {
			page = w.page21
		}
		if err := page(col, arr, start, m); err != nil {
			return fmt.Errorf("column %q: %w", w.schema.Fields[col].Name, err)
		}
	}
	return nil
}

// columnBytes estimates the page bytes of arr.
func columnBytes(arr arrow.Array) int {
	if bits := bitsPerValue(arr.DataType()); bits > 0 {
		return (arr.Len()*bits + 7) / 8
	}
	start, end := binaryRange(arr, 0, arr.Len())
	return int(end-start) + 8*arr.Len()
}

func (w *Writer) addPage(col int, rowStart uint64, n int, enc []byte, offs, sizes []uint64) {
	w.cols[col].Pages = append(w.cols[col].Pages, lancepb.Page{
		BufferOffsets: offs, BufferSizes: sizes, Length: uint64(n), Encoding: enc, Priority: rowStart,
	})
}

// Finish writes the schema, the column metadata and the footer. It does not
// sync or close the underlying writer. It returns the file size.
func (w *Writer) Finish() (uint64, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.finished {
		return 0, fmt.Errorf("finish called twice: %w", errs.ErrInvalid)
	}
	w.finished = true
	desc := lancepb.FileDescriptor{Fields: w.schema.Fields, Length: w.rows}
	descBytes := desc.Encode()
	descPos := w.pos
	if err := w.raw(descBytes); err != nil {
		return 0, err
	}
	colMetaStart := w.pos
	cmo := make([]byte, 0, 16*len(w.cols))
	for i := range w.cols {
		w.cols[i].Encoding = lancepb.ValuesColumnEncoding
		b := w.cols[i].Encode()
		cmo = binary.LittleEndian.AppendUint64(cmo, w.pos)
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(len(b)))
		if err := w.raw(b); err != nil {
			return 0, err
		}
	}
	cmoStart := w.pos
	if err := w.raw(cmo); err != nil {
		return 0, err
	}
	gboStart := w.pos
	var tail []byte
	tail = binary.LittleEndian.AppendUint64(tail, descPos)
	tail = binary.LittleEndian.AppendUint64(tail, uint64(len(descBytes)))
	tail = binary.LittleEndian.AppendUint64(tail, colMetaStart)
	tail = binary.LittleEndian.AppendUint64(tail, cmoStart)
	tail = binary.LittleEndian.AppendUint64(tail, gboStart)
	tail = binary.LittleEndian.AppendUint32(tail, 1)
	tail = binary.LittleEndian.AppendUint32(tail, uint32(len(w.cols)))
	major, minor := w.opts.Version.FooterNumbers()
	tail = binary.LittleEndian.AppendUint16(tail, major)
	tail = binary.LittleEndian.AppendUint16(tail, minor)
	tail = append(tail, Magic...)
	if err := w.raw(tail); err != nil {
		return 0, err
	}
	return w.pos, nil
}

// rawPadded writes b and pads it to the 8-byte mini-block alignment.
func (w *Writer) rawPadded(b []byte) error {
	if err := w.raw(b); err != nil {
		return err
	}
	return w.raw(padding[:pad8(len(b))-len(b)])
}

// rawPadded64 pads the file to the 64-byte buffer alignment.
func (w *Writer) rawPadded64() error {
	return w.raw(padding[:(alignment-w.pos%alignment)%alignment])
}

func (w *Writer) raw(b []byte) error {
	if _, err := w.out.Write(b); err != nil {
		w.err = err
		return err
	}
	w.pos += uint64(len(b))
	return nil
}
