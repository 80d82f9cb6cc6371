package powerfs

import (
	"context"
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
	faults     *syncFaults // the FS's, which outlive the generation
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

// names runs op, a name operation in the directories dirs, under the
// model's name lock: the directories are tracked first, and the edits op
// returns (what it did, even if it then failed) are logged as one
// operation.
func (g *generation) names(op func() ([]edit, syscall.Errno), dirs ...*node) syscall.Errno {
	g.m.names.Lock()
	defer g.m.names.Unlock()
	for _, d := range dirs {
		if err := g.m.track(d.ino(), d.backing()); err != nil {
			return errno(err)
		}
	}
	edits, e := op()
	g.m.logged(edits)
	return e
}

// named is the edit by which name in n names the inode ch.
func (n *node) named(name string, ch *fs.Inode) edit {
	return edit{dir: n.ino(), name: name, to: entry{ino: childIno(ch), kind: ch.StableAttr().Mode & syscall.S_IFMT}}
}

// removed is the edit by which name in n names nothing.
func (n *node) removed(name string) edit { return edit{dir: n.ino(), name: name} }

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
	var (
		ch *fs.Inode
		fh fs.FileHandle
		fl uint32
	)
	e := n.g.names(func() ([]edit, syscall.Errno) {
		p := filepath.Join(n.backing(), name)
		var st syscall.Stat_t
		existed := syscall.Lstat(p, &st) == nil
		var truncated *fileState
		if existed && flags&syscall.O_TRUNC != 0 {
			var err error
			if truncated, err = n.g.m.fileAt(st.Ino, p); err != nil {
				return nil, errno(err)
			}
		}
		var e syscall.Errno
		if ch, fh, fl, e = n.LoopbackNode.Create(ctx, name, flags, mode, out); e != 0 {
			return nil, e
		}
		if existed {
			if truncated != nil {
				truncated.truncated(0)
			}
			return nil, 0
		}
		return []edit{n.named(name, ch)}, errno(n.g.m.fileCreated(childIno(ch)))
	}, n)
	if e != 0 {
		return nil, nil, 0, e
	}
	return ch, n.g.wrap(fh, ch), fl, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var truncated *fileState
	if flags&syscall.O_TRUNC != 0 {
		var err error
		if truncated, err = n.g.m.fileAt(n.ino(), n.backing()); err != nil {
			return nil, 0, errno(err)
		}
	}
	fh, fl, e := n.LoopbackNode.Open(ctx, flags)
	if e != 0 {
		return nil, 0, e
	}
	if truncated != nil {
		truncated.truncated(0)
	}
	return n.g.wrap(fh, n.EmbeddedInode()), fl, 0
}

// adds runs create, which makes name in n, as a name operation. create
// returns the new inode even if it then failed.
func (n *node) adds(name string, create func() (*fs.Inode, syscall.Errno)) (*fs.Inode, syscall.Errno) {
	var ch *fs.Inode
	e := n.g.names(func() ([]edit, syscall.Errno) {
		var e syscall.Errno
		if ch, e = create(); ch == nil {
			return nil, e
		}
		return []edit{n.named(name, ch)}, e
	}, n)
	return ch, e
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.adds(name, func() (*fs.Inode, syscall.Errno) {
		ch, e := n.LoopbackNode.Mkdir(ctx, name, mode, out)
		if e == 0 {
			n.g.m.dirCreated(childIno(ch))
		}
		return ch, e
	})
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.adds(name, func() (*fs.Inode, syscall.Errno) {
		ch, e := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
		if e == 0 && mode&syscall.S_IFMT == syscall.S_IFREG {
			e = errno(n.g.m.fileCreated(childIno(ch)))
		}
		return ch, e
	})
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.adds(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Symlink(ctx, target, name, out) })
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.adds(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Link(ctx, target, name, out) })
}

// Unlink moves the name into the keep directory instead of removing it, so
// the inode (which the durable state may still name) is never freed and
// its number never reused while this generation lives.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.g.names(func() ([]edit, syscall.Errno) {
		p := filepath.Join(n.backing(), name)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return nil, errno(err)
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return nil, syscall.EISDIR
		}
		if err := syscall.Rename(p, n.g.keepName(st.Ino)); err != nil {
			return nil, errno(err)
		}
		return []edit{n.removed(name)}, 0
	}, n)
}

// Rmdir moves the (empty) directory into the keep directory, for the same
// reason as Unlink.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.g.names(func() ([]edit, syscall.Errno) {
		if e := n.g.keepDir(filepath.Join(n.backing(), name)); e != 0 {
			return nil, e
		}
		return []edit{n.removed(name)}, 0
	}, n)
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
	return n.g.names(func() ([]edit, syscall.Errno) {
		src, err := lentry(filepath.Join(n.backing(), name))
		if err != nil {
			return nil, errno(err)
		}
		target := filepath.Join(np.backing(), newName)
		moved := edit{dir: np.ino(), name: newName, to: src}
		if flags&renameExchange != 0 {
			dst, err := lentry(target)
			if err != nil {
				return nil, errno(err)
			}
			if e := n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags); e != 0 {
				return nil, e
			}
			return []edit{{dir: n.ino(), name: name, to: dst}, moved}, 0
		}
		if flags&renameNoreplace == 0 {
			if e := n.g.keepTarget(target); e != 0 {
				return nil, e
			}
		}
		if e := n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags); e != 0 {
			return nil, e
		}
		return []edit{n.removed(name), moved}, 0
	}, n, np)
}

// keepTarget keeps alive the inode a rename is about to replace at p, if
// any: an empty directory is moved into the keep directory, anything else
// linked there.
func (g *generation) keepTarget(p string) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return 0 // nothing to replace, or the rename fails the same way
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return g.keepDir(p)
	}
	return errno(syscall.Link(p, g.keepName(st.Ino)))
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	h, _ := f.(*file)
	if h != nil {
		f = h.lf
	}
	size, resize := in.GetSize()
	var fst *fileState
	if resize {
		var err error
		if fst, err = n.g.m.fileAt(n.ino(), n.backing()); err != nil {
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
