package lance

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
	"github.com/walctl/walctl/internal/core/writeback"
)

// Descriptor describes one written, synced data file. It carries no
// fragment id: ids are assigned when a commit adds the file to a version.
type Descriptor struct {
	// Path is relative to the dataset root: "data/<name>.lance".
	Path string `json:"path"`
	// Size is the file size in bytes.
	Size uint64 `json:"size"`
	// Rows is the number of rows in the file.
	Rows uint64 `json:"rows"`
	// Checksum is "crc32c:<8 hex digits>" over the whole file.
	Checksum string `json:"checksum"`
	// FileMajor and FileMinor are the format numbers a manifest records
	// (2.0 or 2.1).
	FileMajor uint32 `json:"file_major"`
	FileMinor uint32 `json:"file_minor"`
	// FieldIDs are the Lance field ids of the file's columns, in order.
	FieldIDs []int32 `json:"field_ids"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksumString(sum uint32) string { return fmt.Sprintf("crc32c:%08x", sum) }

// FileOptions configure CreateFile.
type FileOptions struct {
	// Name is the file name under data/ (".lance" is appended if missing).
	// It must be unique to the attempt; a random uuid is used if empty.
	Name string
	// Version is the file format; use the parent manifest's FileVersion().
	Version FileVersion
	// MaxPageBytes bounds one page (lancefile.DefaultMaxPageBytes if 0).
	MaxPageBytes int
}

// bufferSize is the write buffer of a FileWriter; large page buffers bypass it.
const bufferSize = 256 << 10

// FileWriter streams record batches into one new data file.
type FileWriter struct {
	f      *os.File
	bw     *bufio.Writer
	crc    hash.Hash32
	lw     *lancefile.Writer
	rel    string
	schema *Schema
	vers   FileVersion
	// finished is set by Finish, with its outcome and the file size.
	finished  bool
	finishErr error
	size      uint64
	done      bool
}

// writeBehind is how many bytes a FileWriter writes before it asks the
// kernel to start writing them back (writeback.Start), so the disk works
// while the rest of the file is encoded and Close's fsync waits only for
// the tail. The fsync at Close is what makes the file durable, unchanged.
const writeBehind = 8 << 20

// fileSink checksums and writes a data file's bytes, starting writeback of
// every writeBehind bytes written.
type fileSink struct {
	f       *os.File
	h       hash.Hash32
	off     int64 // bytes written
	started int64 // bytes whose writeback was started
}

func (s *fileSink) Write(p []byte) (int, error) {
	s.h.Write(p)
	n, err := s.f.Write(p)
	s.off += int64(n)
	if s.off-s.started >= writeBehind {
		writeback.Start(s.f, s.started, s.off-s.started)
		s.started = s.off
	}
	return n, err
}

// CreateFile creates data/<name>.lance exclusively (O_EXCL: an existing file
// is never overwritten, that is ErrCommitConflict's file-level twin
// errs.ErrConflict) and returns a writer for it. Close it to get the
// Descriptor, or Abort it to remove the partial file.
func (d *Dataset) CreateFile(schema *Schema, opts FileOptions) (*FileWriter, error) {
	name := opts.Name
	if name == "" {
		name = uuid.NewString()
	}
	if !strings.HasSuffix(name, ".lance") {
		name += ".lance"
	}
	if strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("data file name %q: %w", name, errs.ErrInvalid)
	}
	if err := durable.MkdirAll(filepath.Join(d.root, dataDir), 0o755); err != nil {
		return nil, err
	}
	rel := dataDir + "/" + name
	f, err := os.OpenFile(filepath.Join(d.root, rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s: %w", rel, errs.ErrConflict)
		}
		return nil, err
	}
	fw := &FileWriter{f: f, crc: crc32.New(castagnoli), rel: rel, schema: schema, vers: opts.Version}
	fw.bw = bufio.NewWriterSize(&fileSink{f: f, h: fw.crc}, bufferSize)
	fw.lw, err = lancefile.NewWriter(fw.bw, schema, lancefile.Options{Version: opts.Version, MaxPageBytes: opts.MaxPageBytes})
	if err != nil {
		fw.Abort()
		return nil, err
	}
	return fw, nil
}

// Path returns the file's path relative to the dataset root.
func (w *FileWriter) Path() string { return w.rel }

// Write appends a batch; its schema must equal the file's (types and
// nullability). A refused batch leaves the file usable; an I/O error does not.
func (w *FileWriter) Write(rec arrow.Record) error { return w.lw.Write(rec) }

// WorkspaceBytes returns the writer's own memory: the encoder workspace so
// far plus the write buffer. Batches are the caller's.
func (w *FileWriter) WorkspaceBytes() int { return w.lw.WorkspaceBytes() + bufferSize }

// Finish writes the rest of the file and its footer without syncing them.
// The encoder's workspace is then no longer needed: a caller accounting for
// it may release it before Close, whose fsync needs no memory. Close calls
// Finish if the caller did not.
func (w *FileWriter) Finish() error {
	if w.done {
		return fmt.Errorf("%s: already closed: %w", w.rel, errs.ErrInvalid)
	}
	if !w.finished {
		w.finished = true
		w.size, w.finishErr = w.lw.Finish()
		if w.finishErr == nil {
			w.finishErr = w.bw.Flush()
		}
	}
	return w.finishErr
}

// Close finishes the file, fsyncs it and the data directory (so the file's
// name is durable before its descriptor can be recorded), and returns the
// file's descriptor. On error the partial file is removed; a failed fsync
// wraps durable.ErrSyncFailed.
func (w *FileWriter) Close() (Descriptor, error) {
	if w.done {
		return Descriptor{}, fmt.Errorf("%s: already closed: %w", w.rel, errs.ErrInvalid)
	}
	err := w.Finish()
	size := w.size
	if err == nil {
		err = durable.SyncFile(w.f)
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.done = true
	if err == nil {
		err = durable.SyncDir(filepath.Dir(w.f.Name()))
	}
	if err != nil {
		os.Remove(w.f.Name())
		return Descriptor{}, fmt.Errorf("write %s: %w", w.rel, err)
	}
	major, minor := w.vers.ManifestNumbers()
	return Descriptor{
		Path: w.rel, Size: size, Rows: w.lw.Rows(), Checksum: checksumString(w.crc.Sum32()),
		FileMajor: major, FileMinor: minor, FieldIDs: w.schema.FieldIDs(),
	}, nil
}

// Abort closes and removes the partial file.
func (w *FileWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.f.Close()
	return os.Remove(w.f.Name())
}

// VerifyFile checks that the descriptor's file exists with the recorded size
// and checksum and ends with a Lance footer. A missing file is ErrMissingFile,
// any mismatch ErrCorruptFile; both name the path.
func (d *Dataset) VerifyFile(desc Descriptor) error {
	p, err := d.dataPath(desc.Path)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", p, ErrMissingFile)
		}
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if uint64(st.Size()) != desc.Size {
		return fmt.Errorf("%s: size %d, descriptor says %d: %w", p, st.Size(), desc.Size, ErrCorruptFile)
	}
	h := crc32.New(castagnoli)
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(h, f, buf); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if got := checksumString(h.Sum32()); got != desc.Checksum {
		return fmt.Errorf("%s: checksum %s, descriptor says %s: %w", p, got, desc.Checksum, ErrCorruptFile)
	}
	var tail [lancefile.FooterLen]byte
	if st.Size() < lancefile.FooterLen {
		return fmt.Errorf("%s: %d bytes, shorter than a footer: %w", p, st.Size(), ErrCorruptFile)
	}
	if _, err := f.ReadAt(tail[:], st.Size()-lancefile.FooterLen); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if string(tail[36:]) != lancefile.Magic {
		return fmt.Errorf("%s: footer magic %q: %w", p, tail[36:], ErrCorruptFile)
	}
	if cols := binary.LittleEndian.Uint32(tail[28:]); int(cols) != len(desc.FieldIDs) && len(desc.FieldIDs) > 0 {
		return fmt.Errorf("%s: %d columns, descriptor says %d: %w", p, cols, len(desc.FieldIDs), ErrCorruptFile)
	}
	return nil
}

// dataPath resolves a descriptor path, which must be data/<name>.
func (d *Dataset) dataPath(rel string) (string, error) {
	name, ok := strings.CutPrefix(rel, dataDir+"/")
	if !ok || name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("data file path %q is not data/<name>: %w", rel, errs.ErrInvalid)
	}
	return filepath.Join(d.root, dataDir, name), nil
}
