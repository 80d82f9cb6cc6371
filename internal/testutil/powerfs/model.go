package powerfs

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
)

// entry is one name of a directory: the inode it names and its type bits.
type entry struct {
	ino  uint64
	kind uint32 // st_mode & S_IFMT
}

// extent is a byte range [off, end) written since the last fsync.
type extent struct{ off, end int64 }

// fileState is what the model knows of a regular file changed since the
// mount: its durable image (a file of its own, holding the content as of
// the last fsync) and what was dirtied since.
type fileState struct {
	mu      sync.Mutex
	img     string
	dirty   []extent
	minSize int64 // smallest size since the last fsync, -1 when not truncated
}

// model is the durable state of one mounted generation. An inode it does
// not track has not changed since the mount: what is durable of it is what
// is live. Inodes are keyed by their number in the backing file system;
// none is reused while the model lives, because nothing is ever really
// removed (see node.go: a removed name is moved into the keep directory).
type model struct {
	imgDir string

	// names serializes the name operations and the directory fsyncs, so
	// that the operations' numbers are the order in which they took
	// effect. It is taken before mu.
	names sync.Mutex

	mu    sync.Mutex
	files map[uint64]*fileState
	dirs  map[uint64]*dirState
	imgs  int   // numbers the images
	ops   int64 // numbers the name operations
}

func newModel(imgDir string) *model {
	return &model{imgDir: imgDir, files: map[uint64]*fileState{}, dirs: map[uint64]*dirState{}}
}

// fileCreated starts tracking a new file: never synced, its durable image
// is empty.
func (m *model) fileCreated(ino uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	img := m.newImgLocked(ino)
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return err
	}
	m.files[ino] = &fileState{img: img, minSize: -1}
	return nil
}

func (m *model) newImgLocked(ino uint64) string {
	m.imgs++
	return filepath.Join(m.imgDir, strconv.FormatUint(ino, 10)+"-"+strconv.Itoa(m.imgs))
}

// file returns the state of ino, tracking it first if needed: a file that
// existed at the mount gets its current content (read through open, the
// path or descriptor of the live file) as its durable image.
func (m *model) file(ino uint64, open func() (*os.File, error)) (*fileState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fst, ok := m.files[ino]; ok {
		return fst, nil
	}
	src, err := open()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	img := m.newImgLocked(ino)
	dst, err := os.Create(img)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("powerfs: durable image of inode %d: %w", ino, err)
	}
	fst := &fileState{img: img, minSize: -1}
	m.files[ino] = fst
	return fst, nil
}

// fileAt is file for the inode ino, whose live path is path.
func (m *model) fileAt(ino uint64, path string) (*fileState, error) {
	return m.file(ino, func() (*os.File, error) { return os.Open(path) })
}

// wrote records a write of [off, off+n) to the file.
func (fst *fileState) wrote(off, n int64) {
	if n <= 0 {
		return
	}
	fst.mu.Lock()
	defer fst.mu.Unlock()
	if k := len(fst.dirty); k > 0 && fst.dirty[k-1].end == off {
		fst.dirty[k-1].end = off + n // the common case: an append
		return
	}
	fst.dirty = append(fst.dirty, extent{off, off + n})
}

// truncated records a change of the file's size to size.
func (fst *fileState) truncated(size int64) {
	fst.mu.Lock()
	defer fst.mu.Unlock()
	if fst.minSize < 0 || size < fst.minSize {
		fst.minSize = size
	}
}

// synced makes the live content of the file (read from src) its durable
// image: only the extents written since the last sync are copied.
func (fst *fileState) synced(src *os.File) error {
	fst.mu.Lock()
	defer fst.mu.Unlock()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	img, err := os.OpenFile(fst.img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	if fst.minSize >= 0 {
		// Bytes cut by a truncation read back as zeros if the file grows
		// again: drop them from the image before copying the new extents.
		if err := img.Truncate(fst.minSize); err != nil {
			return err
		}
	}
	buf := make([]byte, copyBuf)
	for _, e := range merged(fst.dirty) {
		if e.off < size {
			if err := copyRange(img, src, e.off, min(e.end, size), buf); err != nil {
				return err
			}
		}
	}
	if err := img.Truncate(size); err != nil {
		return err
	}
	fst.dirty, fst.minSize = fst.dirty[:0], -1
	return nil
}

// syncFailed is a failed fsync of the file, with the semantics of Linux
// since 4.13 (ext4, xfs): the pages dirty at that moment are marked clean
// without being written, so they are lost at a power cut, while reads keep
// returning them from the page cache until then, and a later fsync, which
// succeeds, does not write them. (A page dirtied again would be written
// whole by Linux, failed bytes included; the model keeps only the bytes
// written after the failure, which a caller cannot tell apart.) A
// truncation since the last fsync stays pending: it is journaled, and the
// journal commits it regardless.
func (fst *fileState) syncFailed() {
	fst.mu.Lock()
	defer fst.mu.Unlock()
	fst.dirty = fst.dirty[:0]
}

// copyBuf is the size of the buffer of copyRange.
const copyBuf = 1 << 20

// copyRange copies [from, to) of src into img at the same offsets. Bytes
// beyond the end of src are zeros, as the page cache holds them.
func copyRange(img, src *os.File, from, to int64, buf []byte) error {
	for off := from; off < to; {
		b := buf[:min(int64(len(buf)), to-off)]
		n, err := src.ReadAt(b, off)
		if err == io.EOF {
			clear(b[n:])
			n, err = len(b), nil
		}
		if err != nil {
			return err
		}
		if _, err := img.WriteAt(b[:n], off); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// merged returns the extents sorted and with overlapping or adjacent ones
// joined.
func merged(dirty []extent) []extent {
	out := slices.Clone(dirty)
	slices.SortFunc(out, func(a, b extent) int { return cmp.Compare(a.off, b.off) })
	k := 0
	for _, e := range out {
		if k > 0 && e.off <= out[k-1].end {
			out[k-1].end = max(out[k-1].end, e.end)
			continue
		}
		out[k] = e
		k++
	}
	return out[:k]
}

// tracked returns the state of file ino, or nil if the file is untracked
// (its live content is durable).
func (m *model) tracked(ino uint64) *fileState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[ino]
}

// listDir reads the names of the directory at path.
func listDir(path string) (map[string]entry, error) {
	d, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	list := make(map[string]entry, len(names))
	for _, name := range names {
		e, err := lentry(filepath.Join(path, name))
		if err != nil {
			return nil, err
		}
		list[name] = e
	}
	return list, nil
}

// lentry is the entry that names the file at path (not following a
// symbolic link).
func lentry(path string) (entry, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return entry{}, err
	}
	return entry{ino: st.Ino, kind: st.Mode & syscall.S_IFMT}, nil
}
