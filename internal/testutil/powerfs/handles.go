package powerfs

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

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

// Fsyncdir fails, without a change, when a FailSync plan says so.
func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if d.n.g.faults.fire(func() string { return d.n.Path(nil) }) {
		return syscall.EIO
	}
	return errno(d.n.g.m.dirSynced(d.n.ino(), d.n.backing()))
}

// file is an open regular file. It forwards to the loopback file and does
// not offer a passthrough descriptor: every write must reach the model.
type file struct {
	lf  *fs.LoopbackFile
	in  *fs.Inode
	ino uint64
	g   *generation
}

// wrap wraps the loopback handle of the file in (never the root).
func (g *generation) wrap(fh fs.FileHandle, in *fs.Inode) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		panic(fmt.Sprintf("powerfs: loopback file handle of type %T", fh))
	}
	return &file{lf: lf, in: in, ino: childIno(in), g: g}
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
// the backing file: the simulated disk is the model. It fails when a
// FailSync plan says so.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	fst, e := f.state()
	if e != 0 {
		return e
	}
	if f.g.faults.fire(func() string { return f.in.Path(nil) }) {
		fst.syncFailed()
		return syscall.EIO
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
