package lance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
	"github.com/walctl/walctl/internal/core/objstore"
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
	// ETag is the object store's entity tag of the file as uploaded (""
	// on a local filesystem): the verifier refuses a replaced object.
	ETag string `json:"etag,omitempty"`
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

// FileWriter streams record batches into one new data file on the
// dataset's store (a local file, or an S3 object: one PUT, or a multipart
// upload with bounded part buffers for a large file).
type FileWriter struct {
	ow     objstore.Writer
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

// CreateFile creates data/<name>.lance exclusively (an existing local file
// is never overwritten, that is ErrCommitConflict's file-level twin
// errs.ErrConflict; on S3 the name is unique to the attempt) and returns a
// writer for it. Close it to get the Descriptor, or Abort it to remove the
// partial file (abort the upload).
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
	rel := dataDir + "/" + name
	ow, err := d.store.Create(context.Background(), rel)
	if err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, fmt.Errorf("%s: %w", rel, errs.ErrConflict)
		}
		return nil, err
	}
	fw := &FileWriter{ow: ow, rel: rel, schema: schema, vers: opts.Version}
	fw.lw, err = lancefile.NewWriter(ow, schema, lancefile.Options{Version: opts.Version, MaxPageBytes: opts.MaxPageBytes})
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
// far plus the store writer's buffer (one multipart part on S3). Batches are the caller's.
func (w *FileWriter) WorkspaceBytes() int { return w.lw.WorkspaceBytes() + w.ow.BufferBytes() }

// StoreBufferBytes is the part of WorkspaceBytes the writer holds until
// Close: the store writer's buffers (on S3, parts still to upload).
func (w *FileWriter) StoreBufferBytes() int { return w.ow.BufferBytes() }

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
	}
	return w.finishErr
}

// Close finishes the file and makes it durable: locally an fsync of the
// file and of the data directory (so the file's name is durable before its
// descriptor can be recorded), on S3 the completed upload. It returns the
// file's descriptor. On error the partial file is removed (the upload
// aborted); a failed fsync wraps durable.ErrSyncFailed.
func (w *FileWriter) Close() (Descriptor, error) {
	if w.done {
		return Descriptor{}, fmt.Errorf("%s: already closed: %w", w.rel, errs.ErrInvalid)
	}
	err := w.Finish()
	size := w.size
	if err == nil {
		w.done = true
		err = w.ow.Commit()
	} else {
		w.Abort()
	}
	if err != nil {
		return Descriptor{}, fmt.Errorf("write %s: %w", w.rel, err)
	}
	major, minor := w.vers.ManifestNumbers()
	desc := Descriptor{
		Path: w.rel, Size: size, Rows: w.lw.Rows(), Checksum: checksumString(w.ow.CRC32C()),
		ETag: w.ow.Committed().ETag, FileMajor: major, FileMinor: minor, FieldIDs: w.schema.FieldIDs(),
	}
	if in := w.ow.Committed(); in.HasCRC32C && checksumString(in.CRC32C) != desc.Checksum {
		return Descriptor{}, fmt.Errorf("write %s: the store keeps checksum %s, the writer computed %s: %w",
			w.rel, checksumString(in.CRC32C), desc.Checksum, ErrCorruptFile)
	}
	return desc, nil
}

// Abort removes the partial file (aborts the upload).
func (w *FileWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	return w.ow.Abort()
}

// VerifyFile checks that the descriptor's file exists with the recorded size
// and checksum and ends with a Lance footer. A missing file is ErrMissingFile,
// any mismatch ErrCorruptFile; both name the path.
//
// On an object store that keeps a whole-object CRC-32C it computed itself
// from the bytes it received (S3 FULL_OBJECT checksums), one HEAD is the
// check: same size, same ETag, same CRC-32C as the writer's means the very
// bytes the writer produced, footer included. Elsewhere (a local
// filesystem, a store without checksums, an object replaced without one)
// the file is read and hashed.
func (d *Dataset) VerifyFile(desc Descriptor) error {
	key, err := d.dataPath(desc.Path)
	if err != nil {
		return err
	}
	p := d.store.Join(key)
	in, err := d.store.Stat(context.Background(), key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("%s: %w", p, ErrMissingFile)
		}
		return err
	}
	if uint64(in.Size) != desc.Size {
		return fmt.Errorf("%s: size %d, descriptor says %d: %w", p, in.Size, desc.Size, ErrCorruptFile)
	}
	if desc.ETag != "" && in.ETag != desc.ETag {
		return fmt.Errorf("%s: ETag %s, descriptor says %s (the object was replaced): %w", p, in.ETag, desc.ETag, ErrCorruptFile)
	}
	if in.HasCRC32C {
		if got := checksumString(in.CRC32C); got != desc.Checksum {
			return fmt.Errorf("%s: the store's checksum %s, descriptor says %s: %w", p, got, desc.Checksum, ErrCorruptFile)
		}
		return nil
	}
	return d.verifyRead(key, desc)
}

// verifyRead reads and hashes the file, then checks its footer.
func (d *Dataset) verifyRead(key string, desc Descriptor) error {
	p := d.store.Join(key)
	r, err := d.store.Open(context.Background(), key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("%s: %w", p, ErrMissingFile)
		}
		return err
	}
	defer r.Close()
	size := r.Size()
	if uint64(size) != desc.Size {
		return fmt.Errorf("%s: size %d, descriptor says %d: %w", p, size, desc.Size, ErrCorruptFile)
	}
	h := crc32.New(castagnoli)
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(h, io.NewSectionReader(r, 0, size), buf); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if got := checksumString(h.Sum32()); got != desc.Checksum {
		return fmt.Errorf("%s: checksum %s, descriptor says %s: %w", p, got, desc.Checksum, ErrCorruptFile)
	}
	var tail [lancefile.FooterLen]byte
	if size < lancefile.FooterLen {
		return fmt.Errorf("%s: %d bytes, shorter than a footer: %w", p, size, ErrCorruptFile)
	}
	if _, err := r.ReadAt(tail[:], size-lancefile.FooterLen); err != nil {
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

// dataPath resolves a descriptor path, which must be data/<name>, to its key.
func (d *Dataset) dataPath(rel string) (string, error) {
	name, ok := strings.CutPrefix(rel, dataDir+"/")
	if !ok || name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("data file path %q is not data/<name>: %w", rel, errs.ErrInvalid)
	}
	return dataDir + "/" + name, nil
}
