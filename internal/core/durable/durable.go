// Package durable is walctl's one place for making file-system changes
// survive a power loss: every create, rename, link and remove that a
// durability promise depends on goes through it and is followed by an fsync
// of the parent directory (and, for new directories, of their parents up to
// the first one that already existed).
//
// A failed fsync is never retried and trusted: on Linux a second fsync can
// report success although the data it covered never reached the disk
// ("fsyncgate"). Every error from an fsync is wrapped in ErrSyncFailed so
// that callers can stop using the file or directory and say why, instead of
// retrying.
//
// Each operation passes through failpoints named after its site (write,
// fsync, rename, link, remove, mkdir), so fault tests can inject EIO or
// ENOSPC where a real disk would fail. The fsync site's argument is 0 for a
// file and 1 for a directory ("durable-fsync=kill@1": at the first
// directory sync, e.g. right after a rename).
package durable

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/walctl/walctl/internal/core/failpoint"
)

// ErrSyncFailed marks an fsync (of a file or a directory) that returned an
// error. What it covered must be taken as lost: the caller must not sync
// again and trust the answer.
var ErrSyncFailed = errors.New("fsync failed: the data it covered may not be durable")

// Failpoint names of the sites, for WALCTL_FAILPOINTS. Their "error" action
// is reported as EIO, except at FailWrite, where it is ENOSPC (the two a
// real disk gives most often).
const (
	FailWrite  = "durable-write"
	FailSync   = "durable-fsync"
	FailRename = "durable-rename"
	FailLink   = "durable-link"
	FailRemove = "durable-remove"
	FailMkdir  = "durable-mkdir"
)

// Arguments of the fsync site.
const (
	syncOfFile = 0
	syncOfDir  = 1
)

// inject runs the failpoint of a site (with argument arg), turning an
// injected error into the errno a disk would give there.
func inject(name string, errno syscall.Errno, arg int) error {
	if err := failpoint.Inject(context.Background(), name, arg); err != nil {
		if errors.Is(err, failpoint.ErrInjected) {
			return fmt.Errorf("%w (%w)", errno, err)
		}
		return err
	}
	return nil
}

// SyncFile fsyncs f; an error wraps ErrSyncFailed.
func SyncFile(f *os.File) error {
	err := inject(FailSync, syscall.EIO, syncOfFile)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w: %w", f.Name(), ErrSyncFailed, err)
	}
	return nil
}

// DataSync fdatasyncs f (on Linux; fsync elsewhere): its data and the
// metadata needed to read it back, without flushing timestamps. It passes
// the fsync failpoint, and an error wraps ErrSyncFailed.
func DataSync(f *os.File) error {
	err := inject(FailSync, syscall.EIO, syncOfFile)
	if err == nil {
		err = fdatasync(f)
	}
	if err != nil {
		return fmt.Errorf("fdatasync %s: %w: %w", f.Name(), ErrSyncFailed, err)
	}
	return nil
}

// SyncDir fsyncs the directory dir, making the names created, renamed,
// linked or removed in it durable; an error wraps ErrSyncFailed.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s to sync it: %w", dir, err)
	}
	err = inject(FailSync, syscall.EIO, syncOfDir)
	if err == nil {
		err = d.Sync()
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w: %w", dir, ErrSyncFailed, err)
	}
	return nil
}

// MkdirAll creates dir and any missing parents, like os.MkdirAll, and makes
// every directory it created durable: each new directory is synced (so its
// own entries can later be synced into it) and so is the parent that got its
// name, up to the first directory that already existed. Existing
// directories are left alone.
func MkdirAll(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("mkdir %s: %w", dir, syscall.ENOTDIR)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	err := inject(FailMkdir, syscall.EIO, 0)
	if err == nil {
		err = os.Mkdir(dir, perm)
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process made it; whoever made it syncs it.
			if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
				return nil
			}
		}
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if err := SyncDir(dir); err != nil {
		return err
	}
	return SyncDir(parent)
}

// WriteNew creates path exclusively (O_EXCL), writes data and fsyncs the
// file. It does not sync the parent: use it for a temporary file that is
// then linked or renamed into place, or sync the parent yourself. On an
// error the partial file is removed.
func WriteNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = inject(FailWrite, syscall.ENOSPC, 0)
	if err == nil {
		_, err = f.Write(data)
		if err != nil {
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err == nil {
		err = SyncFile(f)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", path, cerr)
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// CreateExclusive makes path hold data if no file of that name exists yet:
// a temporary file in tmpDir (same file system as path; "" means path's own
// directory) is written and fsynced, then hard-linked to path, then path's
// directory is fsynced. It reports created=false, with a nil error, when
// path already existed (another writer won). A crash leaves either no path
// or a complete one.
//
// An error after the link (the directory sync) is returned with
// created=true: the name exists but may not survive a power loss, and the
// error wraps ErrSyncFailed.
func CreateExclusive(path, tmpDir string, data []byte) (created bool, err error) {
	if tmpDir == "" {
		tmpDir = filepath.Dir(path)
	}
	tmp, err := os.CreateTemp(tmpDir, ".tmp-*")
	if err != nil {
		return false, err
	}
	name := tmp.Name()
	tmp.Close()
	os.Remove(name)
	if err := WriteNew(name, data); err != nil {
		return false, err
	}
	defer os.Remove(name)
	if err := Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, SyncDir(filepath.Dir(path))
}

// Link hard-links oldname to newname without syncing (the caller syncs
// newname's directory, usually through CreateExclusive). An existing
// newname is reported as fs.ErrExist.
func Link(oldname, newname string) error {
	if err := inject(FailLink, syscall.EIO, 0); err != nil {
		return fmt.Errorf("link %s: %w", newname, err)
	}
	return os.Link(oldname, newname)
}

// WriteAtomic replaces path with data: a temporary file beside it is
// written and fsynced, renamed over path, and the directory is fsynced. A
// crash leaves either the old or the new content.
func WriteAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, ".tmp-"+filepath.Base(path))
	os.Remove(tmp)
	if err := WriteNew(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := inject(FailRename, syscall.EIO, 0); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return SyncDir(dir)
}

// Rename renames from to to and fsyncs both directories (once when they are
// the same). A missing from is reported as fs.ErrNotExist, untouched.
func Rename(from, to string) error {
	if err := inject(FailRename, syscall.EIO, 0); err != nil {
		return fmt.Errorf("rename %s: %w", from, err)
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := SyncDir(filepath.Dir(to)); err != nil {
		return err
	}
	if filepath.Dir(from) != filepath.Dir(to) {
		return SyncDir(filepath.Dir(from))
	}
	return nil
}

// Remove removes path (a file or an empty directory) and fsyncs its parent,
// so the removal cannot be undone by a power loss. A missing path is not an
// error, and its parent is still synced: an earlier removal whose sync
// failed may not be durable.
func Remove(path string) error {
	err := inject(FailRemove, syscall.EIO, 0)
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}
