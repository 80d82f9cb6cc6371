package powerfs

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// materialize builds the durable tree of the generation in dst (an empty
// directory), starting at the root: a name survives only if its parent's
// durable names have it; a file's content is its durable image. Files are
// hard links to the images (or, for files unchanged since the mount, to the
// live files), so nothing is copied.
//
// With tear set, an in-order prefix of the name operations not yet
// durable survives too (see names.go), and each file changed since its
// last fsync keeps a random part of those changes (see fileState.tear).
func (g *generation) materialize(dst string, tear *rand.Rand) error {
	idx, err := g.index()
	if err != nil {
		return err
	}
	var upTo int64 // the last name operation that survives
	if tear != nil {
		upTo = g.m.cutPoint(tear)
	}
	var root syscall.Stat_t
	if err := syscall.Lstat(g.live, &root); err != nil {
		return err
	}
	done := map[uint64]string{root.Ino: dst}
	var visit func(ino uint64, dstDir string) error
	visit = func(ino uint64, dstDir string) error {
		list, err := g.m.durableDir(ino, idx[ino].path, upTo)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(list))
		for name := range list {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			e, p := list[name], filepath.Join(dstDir, name)
			src, ok := idx[e.ino]
			if !ok {
				return fmt.Errorf("inode %d of durable name %s: not found in the backing tree", e.ino, p)
			}
			if prev, ok := done[e.ino]; ok {
				if e.kind == syscall.S_IFDIR {
					// A directory renamed with only one of its two parents
					// synced is named by both: it survives once.
					continue
				}
				if err := os.Link(prev, p); err != nil {
					return err
				}
				continue
			}
			done[e.ino] = p
			switch e.kind {
			case syscall.S_IFDIR:
				if err := os.Mkdir(p, src.perm); err != nil {
					return err
				}
				if err := visit(e.ino, p); err != nil {
					return err
				}
			case syscall.S_IFREG:
				if err := g.materializeFile(e.ino, src, p, tear); err != nil {
					return err
				}
			case syscall.S_IFLNK:
				target, err := os.Readlink(src.path)
				if err != nil {
					return err
				}
				if err := os.Symlink(target, p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return visit(root.Ino, dst)
}

// materializeFile links the file at p: its durable image if the model
// tracks it (torn if tear is set), else the backing file as it is.
func (g *generation) materializeFile(ino uint64, src located, p string, tear *rand.Rand) error {
	fst := g.m.tracked(ino)
	from := src.path
	if fst != nil {
		from = fst.img
		if tear != nil {
			if err := fst.tear(src.path, tear); err != nil {
				return err
			}
		}
		if err := os.Chmod(from, src.perm); err != nil {
			return err
		}
	}
	return os.Link(from, p)
}

// located is where an inode of the generation is found, and its permissions.
type located struct {
	path string
	perm fs.FileMode
}

// index finds every inode of the generation: in the live tree or, for
// removed names, in the keep directory (nothing is ever freed).
func (g *generation) index() (map[uint64]located, error) {
	idx := map[uint64]located{}
	for _, top := range []string{g.live, g.keep} {
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				return err
			}
			if _, ok := idx[st.Ino]; !ok {
				idx[st.Ino] = located{path: p, perm: fs.FileMode(st.Mode & 0o7777)}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return idx, nil
}

// Loss is what a power cut discarded, by path relative to the mount.
type Loss struct {
	// Vanished names: live before the cut, absent after.
	Vanished []string
	// Revived names: removed or renamed away before the cut, without a sync
	// of their directory, so present again.
	Revived []string
	// RolledBack files: present on both sides with a different size (the
	// writes after their last fsync were lost).
	RolledBack []string
}

// Empty reports whether the cut lost nothing.
func (l *Loss) Empty() bool {
	return len(l.Vanished) == 0 && len(l.Revived) == 0 && len(l.RolledBack) == 0
}

// String lists the loss, at most 40 paths of each kind.
func (l *Loss) String() string {
	var b strings.Builder
	for _, line := range l.Lines(40) {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// Lines lists the loss, one path a line, at most max paths of each kind.
func (l *Loss) Lines(max int) []string {
	var out []string
	for _, k := range []struct {
		what  string
		paths []string
	}{{"vanished", l.Vanished}, {"revived", l.Revived}, {"rolled back", l.RolledBack}} {
		for i, p := range k.paths {
			if i == max {
				out = append(out, fmt.Sprintf("%s: … %d more", k.what, len(k.paths)-max))
				break
			}
			out = append(out, k.what+": "+p)
		}
	}
	return out
}

// compare lists what differs between the live tree before the cut and the
// surviving one.
func compare(before, after string) (*Loss, error) {
	a, err := sizes(before)
	if err != nil {
		return nil, err
	}
	b, err := sizes(after)
	if err != nil {
		return nil, err
	}
	l := &Loss{}
	for p, sa := range a {
		sb, ok := b[p]
		switch {
		case !ok:
			l.Vanished = append(l.Vanished, p)
		case sa != sb:
			l.RolledBack = append(l.RolledBack, fmt.Sprintf("%s (%d bytes live, %d durable)", p, sa, sb))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			l.Revived = append(l.Revived, p)
		}
	}
	l.Vanished, l.Revived = topmost(l.Vanished), topmost(l.Revived)
	slices.Sort(l.RolledBack)
	return l, nil
}

// topmost sorts paths and drops those under a directory in the list.
func topmost(paths []string) []string {
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		if n := len(out); n > 0 && strings.HasSuffix(out[n-1], "/") && strings.HasPrefix(p, out[n-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// sizes maps every path under root (relative, directories ending in "/")
// to its size (-1 for a directory).
func sizes(root string) (map[string]int64, error) {
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = -1
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = info.Size()
		return nil
	})
	return out, err
}
