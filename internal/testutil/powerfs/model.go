package powerfs

import (
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

	mu    sync.Mutex
	files map[uint64]*fileState
	dirs  map[uint64]map[string]entry // durable entry lists
	seq   int                         // numbers the images
}

func newModel(imgDir string) *model {
	return &model{imgDir: imgDir, files: map[uint64]*fileState{}, dirs: map[uint64]map[string]entry{}}
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
	m.seq++
	return filepath.Join(m.imgDir, strconv.FormatUint(ino, 10)+"-"+strconv.Itoa(m.seq))
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
	slices.SortFunc(fst.dirty, func(a, b extent) int { return int(a.off - b.off) })
	buf := make([]byte, 1<<20)
	for _, e := range fst.dirty {
		for off := e.off; off < min(e.end, size); {
			n, err := src.ReadAt(buf[:min(int64(len(buf)), min(e.end, size)-off)], off)
			if n > 0 {
				if _, werr := img.WriteAt(buf[:n], off); werr != nil {
					return werr
				}
				off += int64(n)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
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

// dirCreated starts tracking a new directory: its durable list is empty.
func (m *model) dirCreated(ino uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs[ino] = map[string]entry{}
}

// beforeNameChange is called before any name in the directory at path
// (inode ino) is created, removed or renamed: if the directory was not
// tracked yet, its current names were durable.
func (m *model) beforeNameChange(ino uint64, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dirs[ino]; ok {
		return nil
	}
	list, err := listDir(path)
	if err != nil {
		return err
	}
	m.dirs[ino] = list
	return nil
}

// dirSynced makes the current names of the directory at path durable.
func (m *model) dirSynced(ino uint64, path string) error {
	list, err := listDir(path)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs[ino] = list
	return nil
}

// durableDir returns the durable names of the directory ino, whose live
// path (for an untracked one) is live.
func (m *model) durableDir(ino uint64, live string) (map[string]entry, error) {
	m.mu.Lock()
	list, ok := m.dirs[ino]
	m.mu.Unlock()
	if ok {
		return list, nil
	}
	return listDir(live)
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
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(path, name), &st); err != nil {
			if err == syscall.ENOENT {
				continue // removed while listing: a concurrent change
			}
			return nil, err
		}
		list[name] = entry{ino: st.Ino, kind: st.Mode & syscall.S_IFMT}
	}
	return list, nil
}
