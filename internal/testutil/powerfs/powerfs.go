// Package powerfs is a test file system that forgets what was never made
// durable, in the spirit of Jepsen's LazyFS: a FUSE loopback mount over a
// backing directory that keeps track of every write, truncate and name
// operation (create, mkdir, mknod, symlink, link, unlink, rmdir, rename),
// and on a simulated power cut keeps only what a POSIX file system
// promises to keep:
//
//   - a file's content is what it held at its last successful fsync or
//     fdatasync (empty if it was never synced);
//   - a name is durable once its parent directory is fsynced; until then
//     the directory's names are those of its previous fsync;
//   - the root of the mount is durable.
//
// A torn cut (CutOptions.Tear) also keeps what ext4 (data=ordered) and xfs
// may have written of the rest when the power went:
//
//   - names: a random in-order prefix of the name operations not yet
//     durable, across directories (a journal commits metadata in order,
//     never a later name change without every earlier one), whatever
//     became of the files' data: a rename may survive without the renamed
//     file's unsynced content;
//   - data: each page written since the last fsync is written back whole,
//     not at all, or torn, keeping some of its 512-byte sectors;
//   - size: the durable or the live size, any sector boundary between,
//     or, one cut in eight, any byte between (a file ending inside a
//     record); bytes below the size whose data did not survive read as
//     zeros;
//   - truncation: a truncation since the last fsync committed (the bytes
//     it cut read as zeros, the size lies between the smallest size it
//     was truncated to and the live size) or not (the durable size and
//     bytes survive, but for the page holding its point, overwritten in
//     place); see fileState.tear.
//
// FailSync makes fsync and fdatasync fail with EIO as Linux does: the
// data dirty at a failing file fsync is marked clean without reaching the
// disk, so it is lost at a cut while reads return it until then, and a
// later fsync succeeds without it.
//
// Reads and writes pass through to the backing directory (the live tree).
// Per inode the model keeps a durable image, updated at fsync from only the
// extents written since the previous fsync; per directory the names of its
// last fsync and the numbered name operations since. PowerCut unmounts
// (the caller kills the processes using the mount first), builds the
// surviving tree from the durable state into a new backing directory and
// mounts it at the same place.
//
// The model is stricter than ext4 in ways POSIX allows: a file fsync makes
// no name durable, and a directory fsync makes durable only that
// directory's names, not every earlier name operation.
//
// The mount needs /dev/fuse and root (it mounts directly, without
// fusermount).
package powerfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrNoFUSE is returned by Mount when /dev/fuse cannot be used.
var ErrNoFUSE = errors.New("powerfs: /dev/fuse is not available")

// FS is a mounted power-loss file system.
type FS struct {
	mnt, state string
	gen        int
	g          *generation
	server     *fuse.Server
	faults     syncFaults
}

// Mount mounts an empty power-loss file system at mountpoint (an existing
// empty directory). stateDir holds the backing trees and durable images of
// each generation; it must be on one local file system.
func Mount(mountpoint, stateDir string) (*FS, error) {
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoFUSE, err)
	} else {
		f.Close()
	}
	f := &FS{mnt: mountpoint, state: stateDir}
	if err := f.newGeneration(); err != nil {
		return nil, err
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.mnt }

// Cuts is the number of power cuts so far.
func (f *FS) Cuts() int { return f.gen }

func (f *FS) genDir(n int) string { return filepath.Join(f.state, strconv.Itoa(n)) }

// newGeneration creates the directories of generation f.gen.
func (f *FS) newGeneration() error {
	d := f.genDir(f.gen)
	g := &generation{live: filepath.Join(d, "live"), keep: filepath.Join(d, "keep"), faults: &f.faults}
	img := filepath.Join(d, "img")
	for _, p := range []string{g.live, g.keep, img} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	g.m = newModel(img)
	f.g = g
	return nil
}

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.g.live, &st); err != nil {
		return err
	}
	f.g.rootIno = st.Ino
	root := &fs.LoopbackRoot{Path: f.g.live, Dev: uint64(st.Dev)}
	root.NewNode = f.g.newNode
	root.RootNode = f.g.newNode(root, nil, "", &st)
	server, err := fs.Mount(f.mnt, root.RootNode, &fs.Options{
		MountOptions: fuse.MountOptions{DirectMount: true, FsName: "powerfs", Name: "powerfs"},
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s: %w", f.mnt, err)
	}
	f.server = server
	return nil
}

// Unmount unmounts the file system. Every process using it must have ended
// (or be about to: a busy mount is retried for a few seconds).
func (f *FS) Unmount() error {
	if f.server == nil {
		return nil
	}
	// The kernel does not say when a busy mount stops being busy: retry
	// the unmount for a bounded time.
	var err error
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			err = f.server.Unmount()
			return err == nil, nil
		})
	if err != nil {
		return fmt.Errorf("powerfs: unmount %s: %w", f.mnt, err)
	}
	f.server.Wait()
	f.server = nil
	return nil
}

// CutOptions vary a power cut.
type CutOptions struct {
	// Tear, when set, lets a random part of what was not made durable
	// survive (see the package doc): a prefix of the name operations,
	// pages and sectors of each file's writes, its size, its truncation.
	// Without it every unsynced change is lost whole.
	Tear *rand.Rand
}

// PowerCut simulates a power loss: it unmounts the file system (the caller
// has killed every process using it), keeps only what was durable, and
// mounts the surviving tree at the same place. The returned Loss says what
// was discarded.
func (f *FS) PowerCut(opts CutOptions) (*Loss, error) {
	if err := f.Unmount(); err != nil {
		return nil, err
	}
	old := f.g
	f.gen++
	if err := f.newGeneration(); err != nil {
		return nil, err
	}
	if err := old.materialize(f.g.live, opts.Tear); err != nil {
		return nil, fmt.Errorf("powerfs: power cut %d: %w", f.gen, err)
	}
	loss, err := compare(old.live, f.g.live)
	if err != nil {
		return nil, err
	}
	// Materialized files are hard links to the old generation's files and
	// images: the old generation is gone for good.
	if err := os.RemoveAll(f.genDir(f.gen - 1)); err != nil {
		return nil, err
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return loss, nil
}
