package objstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/writeback"
)

// TempDir is where a local store stages conditional creates, relative to
// its root: inside it (so link(2) stays on one filesystem) and outside any
// directory a Lance reader lists.
const TempDir = "_walctl/tmp"

// Local is a store over a directory. Every create, link and removal is made
// durable through internal/core/durable (file and parent-directory fsync).
type Local struct {
	root string
}

// NewLocal returns the store rooted at dir (made absolute when the working
// directory is known; not created).
func NewLocal(dir string) *Local {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Local{root: filepath.Clean(dir)}
}

func (l *Local) path(key string) string { return filepath.Join(l.root, filepath.FromSlash(key)) }

// String returns the store's directory.
func (l *Local) String() string { return l.root }

// Join returns key's path.
func (l *Local) Join(key string) string { return l.path(key) }

// Local returns the store's directory.
func (l *Local) Local() string { return l.root }

// Sub returns the store rooted at the directory prefix.
func (l *Local) Sub(prefix string) Store { return &Local{root: l.path(prefix)} }

func notFound(err error, what string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
	}
	return err
}

// Get reads a whole file.
func (l *Local) Get(_ context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(l.path(key))
	return b, notFound(err, l.path(key))
}

type localReader struct {
	*os.File
	size int64
}

func (r localReader) Size() int64 { return r.size }

// Open opens a file for random reads.
func (l *Local) Open(_ context.Context, key string) (Reader, error) {
	f, err := os.Open(l.path(key))
	if err != nil {
		return nil, notFound(err, l.path(key))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return localReader{File: f, size: st.Size()}, nil
}

// Stat describes a file.
func (l *Local) Stat(_ context.Context, key string) (Info, error) {
	st, err := os.Stat(l.path(key))
	if err != nil {
		return Info{}, notFound(err, l.path(key))
	}
	return Info{Key: key, Size: st.Size(), Modified: st.ModTime()}, nil
}

// List returns the regular files directly in dir.
func (l *Local) List(_ context.Context, dir string) ([]Info, error) {
	entries, err := os.ReadDir(l.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.path(dir), err)
	}
	var out []Info
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		st, err := e.Info()
		if err != nil {
			continue // removed since the listing
		}
		out = append(out, Info{Key: joinKey(dir, e.Name()), Size: st.Size(), Modified: st.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ListTree returns the regular files under dir at any depth.
func (l *Local) ListTree(_ context.Context, dir string) ([]Info, error) {
	base := l.path(dir)
	var out []Info
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed since the listing, or no dir at all
			}
			return err
		}
		if e.IsDir() {
			return nil
		}
		st, err := e.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		out = append(out, Info{Key: joinKey(dir, filepath.ToSlash(rel)), Size: st.Size(), Modified: st.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", base, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func joinKey(dir, name string) string {
	dir = strings.Trim(dir, "/")
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// PutIfAbsent writes a temp file under TempDir, fsyncs it, links it to key
// (EEXIST: ErrExists) and fsyncs key's directory. A failed link other than
// EEXIST, or a failed directory sync, is ErrUnknownOutcome.
func (l *Local) PutIfAbsent(ctx context.Context, key string, data []byte, h *Hooks) error {
	final := l.path(key)
	if err := durable.MkdirAll(filepath.Join(l.root, TempDir), 0o755); err != nil {
		return err
	}
	if err := durable.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(l.root, TempDir, uuid.NewString()+".tmp")
	if err := durable.WriteNew(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	defer os.Remove(tmp)
	if err := ctx.Err(); err != nil {
		return err
	}
	if h != nil && h.BeforePublish != nil {
		if err := h.BeforePublish(ctx); err != nil {
			return err
		}
	}
	if err := durable.Link(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", final, ErrExists)
		}
		return fmt.Errorf("link %s: %w: %w", final, ErrUnknownOutcome, err)
	}
	if h != nil && h.AfterPublish != nil {
		if err := h.AfterPublish(ctx); err != nil {
			return fmt.Errorf("%s: %w: %w", final, ErrUnknownOutcome, err)
		}
	}
	if err := durable.SyncDir(filepath.Dir(final)); err != nil {
		return fmt.Errorf("%s: %w: %w", final, ErrUnknownOutcome, err)
	}
	return nil
}

// Put replaces key atomically and durably (temp file, fsync, rename, fsync
// of the directory).
func (l *Local) Put(_ context.Context, key string, data []byte) error {
	p := l.path(key)
	if err := durable.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return durable.WriteAtomic(p, data)
}

// Delete removes key and fsyncs its directory.
func (l *Local) Delete(_ context.Context, key string) error {
	return durable.Remove(l.path(key))
}

// MakeDirs creates each directory durably.
func (l *Local) MakeDirs(_ context.Context, dirs ...string) error {
	for _, d := range dirs {
		if err := durable.MkdirAll(l.path(d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", l.path(d), err)
		}
	}
	return nil
}

// SyncDirs fsyncs each existing directory.
func (l *Local) SyncDirs(_ context.Context, dirs ...string) error {
	for _, d := range dirs {
		p := filepath.Clean(l.path(d))
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := durable.SyncDir(p); err != nil {
			return err
		}
	}
	return nil
}

// writeBehind is how many bytes a local writer writes before it asks the
// kernel to start writing them back (writeback.Start), so the disk works
// while the rest is produced and Commit's fsync waits only for the tail.
const writeBehind = 8 << 20

// bufferSize is a local writer's write buffer.
const bufferSize = 256 << 10

// Create opens key exclusively (O_EXCL: an existing file is ErrExists,
// never overwritten) for streaming.
func (l *Local) Create(_ context.Context, key string) (Writer, error) {
	p := l.path(key)
	if err := durable.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s: %w", p, ErrExists)
		}
		return nil, err
	}
	w := &localWriter{f: f}
	w.bw = bufio.NewWriterSize(w, bufferSize)
	return &localBuffered{w: w, key: key}, nil
}

// localWriter writes through to the file, starting writeback every
// writeBehind bytes.
type localWriter struct {
	f       *os.File
	bw      *bufio.Writer
	off     int64
	started int64
	done    bool
}

func (w *localWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= writeBehind {
		writeback.Start(w.f, w.started, w.off-w.started)
		w.started = w.off
	}
	return n, err
}

type localBuffered struct {
	w         *localWriter
	key       string
	crc       uint32
	committed bool
}

func (b *localBuffered) Write(p []byte) (int, error) {
	n, err := b.w.bw.Write(p)
	b.crc = crc32.Update(b.crc, castagnoli, p[:n])
	return n, err
}

// CRC32C is the checksum of the bytes written so far.
func (b *localBuffered) CRC32C() uint32 { return b.crc }

func (b *localBuffered) BufferBytes() int { return bufferSize }

// Committed gives the file's key and size (a local store keeps no
// checksum: a verifier reads the file).
func (b *localBuffered) Committed() Info {
	if !b.committed {
		return Info{}
	}
	return Info{Key: b.key, Size: b.w.off}
}

// Commit flushes, fsyncs the file and its directory; on error the partial
// file is removed. A failed fsync wraps durable.ErrSyncFailed.
func (b *localBuffered) Commit() error {
	w := b.w
	if w.done {
		return fmt.Errorf("%s: already closed", w.f.Name())
	}
	w.done = true
	err := w.bw.Flush()
	if err == nil {
		err = durable.SyncFile(w.f)
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = durable.SyncDir(filepath.Dir(w.f.Name()))
	}
	if err != nil {
		os.Remove(w.f.Name())
		return err
	}
	b.committed = true
	return nil
}

// Abort closes and removes the partial file.
func (b *localBuffered) Abort() error {
	if b.w.done {
		return nil
	}
	b.w.done = true
	b.w.f.Close()
	return os.Remove(b.w.f.Name())
}
