package lancefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// File is an open Lance v2 data file.
type File struct {
	f       io.ReaderAt
	closer  io.Closer
	path    string
	size    int64
	Version Version
	// Fields is the file's own schema (global buffer 0).
	Fields []lancepb.Field
	// Rows is the file's row count.
	Rows uint64
	cols []*lancepb.ColumnMetadata
}

// OpenFile opens a data file and reads its footer, schema and column
// metadata. A missing file is errs.ErrNotFound; a truncated file, a wrong
// magic or inconsistent offsets are ErrCorrupt; all name the path.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: data file missing: %w", path, errs.ErrNotFound)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	lf, err := openReaderAt(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	lf.closer = f
	return lf, nil
}

// ReaderAtCloser is what a data file is read through: an open file, or an
// object store's ranged reader.
type ReaderAtCloser interface {
	io.ReaderAt
	io.Closer
}

// OpenReader is OpenFile over r, size bytes long, named path in errors
// (an object store's ranged reader). r is closed by Close, or on error.
func OpenReader(r ReaderAtCloser, size int64, path string) (*File, error) {
	lf, err := openReaderAt(r, size, path)
	if err != nil {
		r.Close()
		return nil, err
	}
	lf.closer = r
	return lf, nil
}

// openReaderAt reads the footer, schema and column metadata of a data
// file of size bytes held by r; path names it in errors.
func openReaderAt(r io.ReaderAt, size int64, path string) (*File, error) {
	lf := &File{f: r, path: path, size: size}
	if err := lf.readMeta(); err != nil {
		return nil, err
	}
	return lf, nil
}

// Close closes the file.
func (lf *File) Close() error {
	if lf.closer == nil {
		return nil
	}
	return lf.closer.Close()
}

// Path returns the file's path.
func (lf *File) Path() string { return lf.path }

func (lf *File) corrupt(format string, a ...any) error {
	return fmt.Errorf("%s: %s: %w", lf.path, fmt.Sprintf(format, a...), ErrCorrupt)
}

func (lf *File) read(off, n uint64) ([]byte, error) {
	if off+n > uint64(lf.size) || off+n < off {
		return nil, lf.corrupt("range [%d, %d) beyond end of file (%d bytes)", off, off+n, lf.size)
	}
	b := make([]byte, n)
	if _, err := lf.f.ReadAt(b, int64(off)); err != nil && !(err == io.EOF && n == 0) {
		return nil, fmt.Errorf("read %s: %w", lf.path, err)
	}
	return b, nil
}

func (lf *File) readMeta() error {
	if lf.size < FooterLen {
		return lf.corrupt("truncated: %d bytes, a footer alone is %d", lf.size, FooterLen)
	}
	foot, err := lf.read(uint64(lf.size-FooterLen), FooterLen)
	if err != nil {
		return err
	}
	if string(foot[36:]) != Magic {
		return lf.corrupt("footer magic is %q, want %q (truncated or not a Lance file)", foot[36:], Magic)
	}
	le := binary.LittleEndian
	colMetaStart, cmoStart, gboStart := le.Uint64(foot), le.Uint64(foot[8:]), le.Uint64(foot[16:])
	numGlobal, numCols := le.Uint32(foot[24:]), le.Uint32(foot[28:])
	if lf.Version, err = VersionFromFooter(le.Uint16(foot[32:]), le.Uint16(foot[34:])); err != nil {
		return fmt.Errorf("%s: %w", lf.path, err)
	}
	end := uint64(lf.size - FooterLen)
	if colMetaStart > cmoStart || cmoStart+16*uint64(numCols) > gboStart || gboStart+16*uint64(numGlobal) > end || numGlobal == 0 {
		return lf.corrupt("inconsistent footer offsets")
	}
	gbo, err := lf.read(gboStart, 16)
	if err != nil {
		return err
	}
	descBytes, err := lf.read(le.Uint64(gbo), le.Uint64(gbo[8:]))
	if err != nil {
		return err
	}
	desc, err := lancepb.DecodeFileDescriptor(descBytes)
	if err != nil {
		return lf.corrupt("schema: %v", err)
	}
	lf.Fields, lf.Rows = desc.Fields, desc.Length
	cmo, err := lf.read(cmoStart, 16*uint64(numCols))
	if err != nil {
		return err
	}
	for i := range int(numCols) {
		b, err := lf.read(le.Uint64(cmo[16*i:]), le.Uint64(cmo[16*i+8:]))
		if err != nil {
			return err
		}
		cm, err := lancepb.DecodeColumnMetadata(b)
		if err != nil {
			return lf.corrupt("column %d metadata: %v", i, err)
		}
		lf.cols = append(lf.cols, cm)
	}
	return nil
}

// maxPageRows bounds one page's row count (Arrow lengths and walctl's
// 32-bit offsets stay in range).
const maxPageRows = 1<<31 - 1

// minDecodeBound is what a column may decode to regardless of the file's
// size: all-null pages take no bytes on disk, and the official writer cuts
// pages at a few MiB of (zeroed) values.
const minDecodeBound = 64 << 20

// checkDecodedSize refuses a column whose rows would decode to more memory
// than its file could describe: 8 bytes per byte of file (every encoding
// walctl reads stores at least a bit per row and a u32 offset per
// variable-width value) or minDecodeBound, whichever is larger. Garbage
// then never makes the reader allocate beyond the file's size.
func (lf *File) checkDecodedSize(name string, dt arrow.DataType, rows uint64) error {
	bound := max(8*uint64(lf.size), minDecodeBound)
	rowBits := uint64(max(bitsPerValue(dt), 8))
	if isBinary(dt) {
		rowBits = 64 + 8 // an offset and a validity byte's share
	}
	if rows > bound*8/rowBits {
		return lf.corrupt("column %q claims %d rows of %s, more than a file of %d bytes can hold", name, rows, dt, lf.size)
	}
	return nil
}

// NumColumns returns the number of columns.
func (lf *File) NumColumns() int { return len(lf.cols) }

// ReadColumn reads column col as an Arrow array of type dt. name labels
// errors. Pages walctl cannot decode (compressed or otherwise encoded by
// another writer) fail with ErrUnsupported naming the file, column and
// encoding.
func (lf *File) ReadColumn(col int, name string, dt arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	if col < 0 || col >= len(lf.cols) {
		return nil, lf.corrupt("column %d of %d requested for %q", col, len(lf.cols), name)
	}
	var parts []arrow.Array
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	var total uint64
	for pi, p := range lf.cols[col].Pages {
		if p.Length > maxPageRows || total+p.Length < total {
			return nil, lf.corrupt("column %q page %d has %d rows", name, pi, p.Length)
		}
		total += p.Length
	}
	if err := lf.checkDecodedSize(name, dt, total); err != nil {
		return nil, err
	}
	if total != lf.Rows {
		return nil, lf.corrupt("column %q has %d rows, file has %d", name, total, lf.Rows)
	}
	for pi, p := range lf.cols[col].Pages {
		typeURL, body, err := lancepb.DecodeAny(p.Encoding)
		if err != nil {
			return nil, lf.corrupt("column %q page %d encoding: %v", name, pi, err)
		}
		bufs := make([][]byte, len(p.BufferOffsets))
		if len(p.BufferSizes) != len(p.BufferOffsets) {
			return nil, lf.corrupt("column %q page %d: buffer table mismatch", name, pi)
		}
		for i := range bufs {
			if bufs[i], err = lf.read(p.BufferOffsets[i], p.BufferSizes[i]); err != nil {
				return nil, err
			}
		}
		var arr arrow.Array
		switch typeURL {
		case lancepb.TypeURLArrayEncoding:
			arr, err = decodePage20(body, bufs, int(p.Length), dt, mem)
		case lancepb.TypeURLPageLayout21:
			arr, err = decodePage21(body, bufs, int(p.Length), dt, mem)
		default:
			err = fmt.Errorf("page encoding %q: %w", typeURL, ErrUnsupported)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: column %q page %d: %w", lf.path, name, pi, err)
		}
		if arr.Len() != int(p.Length) {
			arr.Release()
			return nil, lf.corrupt("column %q page %d decoded %d rows, its header says %d", name, pi, arr.Len(), p.Length)
		}
		parts = append(parts, arr)
	}
	if len(parts) == 0 {
		return array.MakeArrayOfNull(mem, dt, 0), nil
	}
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	return array.Concatenate(parts, mem)
}
