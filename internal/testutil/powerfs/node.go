package powerfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node that tells the model about every change before
// (or after) passing it through to the backing directory.
type node struct {
	fs.LoopbackNode
	g *generation
}

// generation is one mounted incarnation of the tree: its backing
// directory, where removed inodes are kept alive, and its model.
type generation struct {
	live, keep string
	rootIno    uint64
	m          *model
	seq        atomic.Int64
}

func (g *generation) newNode(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
	return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, g: g}
}

// keepName is a fresh name in the keep directory for inode ino.
func (g *generation) keepName(ino uint64) string {
	return filepath.Join(g.keep, strconv.FormatUint(ino, 10)+"."+strconv.FormatInt(g.seq.Add(1), 10))
}

func (n *node) backing() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

// ino is the node's inode number in the backing file system (FUSE numbers
// the root 1).
func (n *node) ino() uint64 {
	if n.EmbeddedInode() == n.Root() {
		return n.g.rootIno
	}
	return n.StableAttr().Ino
}

func childIno(ch *fs.Inode) uint64 { return ch.StableAttr().Ino }

// touch is called before a name in n changes.
func (n *node) touch() syscall.Errno {
	return errno(n.g.m.beforeNameChange(n.ino(), n.backing()))
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return fs.ToErrno(err)
}

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
)

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.touch(); e != 0 {
		return nil, nil, 0, e
	}
	p := filepath.Join(n.backing(), name)
	var st syscall.Stat_t
	existed := syscall.Lstat(p, &st) == nil
	if existed && flags&syscall.O_TRUNC != 0 {
		f, err := n.g.m.file(st.Ino, func() (*os.File, error) { return os.Open(p) })
		if err != nil {
			return nil, nil, 0, errno(err)
		}
		f.truncated(0)
	}
	ch, fh, fl, e := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	if !existed {
		if err := n.g.m.fileCreated(childIno(ch)); err != nil {
			return nil, nil, 0, errno(err)
		}
	}
	return ch, n.g.wrap(fh, childIno(ch)), fl, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		p := n.backing()
		f, err := n.g.m.file(n.ino(), func() (*os.File, error) { return os.Open(p) })
		if err != nil {
			return nil, 0, errno(err)
		}
		f.truncated(0)
	}
	fh, fl, e := n.LoopbackNode.Open(ctx, flags)
	if e != 0 {
		return nil, 0, e
	}
	return n.g.wrap(fh, n.ino()), fl, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.touch(); e != 0 {
		return nil, e
	}
	ch, e := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if e == 0 {
		n.g.m.dirCreated(childIno(ch))
	}
	return ch, e
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.touch(); e != 0 {
		return nil, e
	}
	ch, e := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if e == 0 && mode&syscall.S_IFMT == syscall.S_IFREG {
		e = errno(n.g.m.fileCreated(childIno(ch)))
	}
	return ch, e
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.touch(); e != 0 {
		return nil, e
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.touch(); e != 0 {
		return nil, e
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

// Unlink moves the name into the keep directory instead of removing it, so
// the inode (which the durable state may still name) is never freed and
// its number never reused while this generation lives.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.touch(); e != 0 {
		return e
	}
	p := filepath.Join(n.backing(), name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return errno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return syscall.EISDIR
	}
	return errno(syscall.Rename(p, n.g.keepName(st.Ino)))
}

// Rmdir moves the (empty) directory into the keep directory, for the same
// reason as Unlink.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.touch(); e != 0 {
		return e
	}
	return n.g.keepDir(filepath.Join(n.backing(), name))
}

func (g *generation) keepDir(p string) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return errno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return syscall.ENOTDIR
	}
	list, err := listDir(p)
	if err != nil {
		return errno(err)
	}
	if len(list) > 0 {
		return syscall.ENOTEMPTY
	}
	return errno(syscall.Rename(p, g.keepName(st.Ino)))
}

const (
	renameNoreplace = 1 // RENAME_NOREPLACE
	renameExchange  = 2 // RENAME_EXCHANGE
)

// Rename keeps a replaced target alive in the keep directory first.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if e := n.touch(); e != 0 {
		return e
	}
	if e := np.touch(); e != 0 {
		return e
	}
	if flags&(renameNoreplace|renameExchange) == 0 {
		target := filepath.Join(np.backing(), newName)
		var st syscall.Stat_t
		if err := syscall.Lstat(target, &st); err == nil {
			var e syscall.Errno
			if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				e = n.g.keepDir(target)
			} else {
				e = errno(syscall.Link(target, n.g.keepName(st.Ino)))
			}
			if e != 0 {
				return e
			}
		}
	}
	return n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	h, _ := f.(*file)
	if h != nil {
		f = h.lf
	}
	size, resize := in.GetSize()
	var fst *fileState
	if resize {
		p := n.backing()
		var err error
		fst, err = n.g.m.file(n.ino(), func() (*os.File, error) { return os.Open(p) })
		if err != nil {
			return errno(err)
		}
	}
	if e := n.LoopbackNode.Setattr(ctx, f, in, out); e != 0 {
		return e
	}
	if resize {
		fst.truncated(int64(size))
	}
	return 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, fl, e := n.LoopbackNode.OpendirHandle(ctx, flags)
	if e != 0 {
		return nil, 0, e
	}
	return &dir{h: h, n: n}, fl, 0
}

// Tmpfile refuses O_TMPFILE: an unnamed file linked in later would bypass
// the bookkeeping of names. Callers fall back to named files.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// dir is an open directory; its fsync makes the directory's names durable.
type dir struct {
	h fs.FileHandle
	n *node
}

func (d *dir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.h.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.h.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dir) Releasedir(ctx context.Context, flags uint32) {
	d.h.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return errno(d.n.g.m.dirSynced(d.n.ino(), d.n.backing()))
}

// file is an open regular file. It forwards to the loopback file and does
// not offer a passthrough descriptor: every write must reach the model.
type file struct {
	lf  *fs.LoopbackFile
	ino uint64
	g   *generation
}

func (g *generation) wrap(fh fs.FileHandle, ino uint64) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		panic(fmt.Sprintf("powerfs: loopback file handle of type %T", fh))
	}
	return &file{lf: lf, ino: ino, g: g}
}

// reopen opens the live file read-only through its descriptor (it may have
// no name any more, or be open write-only).
func (f *file) reopen() (*os.File, error) {
	fd, ok := f.lf.PassthroughFd()
	if !ok {
		return nil, syscall.EBADF
	}
	return os.Open("/proc/self/fd/" + strconv.Itoa(fd))
}

func (f *file) state() (*fileState, syscall.Errno) {
	fst, err := f.g.m.file(f.ino, f.reopen)
	return fst, errno(err)
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	fst, e := f.state()
	if e != 0 {
		return 0, e
	}
	n, e := f.lf.Write(ctx, data, off)
	fst.wrote(off, int64(n))
	return n, e
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	fst, e := f.state()
	if e != 0 {
		return e
	}
	e = f.lf.Allocate(ctx, off, size, mode)
	if e == 0 {
		fst.wrote(int64(off), int64(size))
	}
	return e
}

// Fsync (and fdatasync) makes the file's content durable; it does not sync
// the backing file: the simulated disk is the model.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	fst, e := f.state()
	if e != 0 {
		return e
	}
	src, err := f.reopen()
	if err != nil {
		return errno(err)
	}
	defer src.Close()
	return errno(fst.synced(src))
}

func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }
func (f *file) Flush(ctx context.Context) syscall.Errno   { return f.lf.Flush(ctx) }
func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}
func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}
func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.lf.Getlk(ctx, owner, lk, flags, out)
}
func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlk(ctx, owner, lk, flags)
}
func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlkw(ctx, owner, lk, flags)
}
