package powerfs

import (
	"maps"
	"math/rand/v2"
	"slices"
)

// A name operation (create, mkdir, mknod, symlink, link, unlink, rmdir,
// rename) changes one or two names. The model numbers the operations in
// the order they took effect and keeps, per directory, the names of its
// last fsync and the changes made since. A directory fsync makes its names
// durable; a torn cut keeps, beyond that, the operations up to a random
// one: the in-order prefix that a journal (ext4's jbd2, xfs's log), which
// commits metadata in order, may have written when the power went.

// edit is one name change of an operation: name in dir now names to, or
// nothing when to is the zero entry (no inode is numbered 0).
type edit struct {
	dir  uint64
	name string
	to   entry
}

// change is an edit as its directory logs it, with its operation's number.
type change struct {
	op   int64
	name string
	to   entry
}

// dirState is what the model knows of a directory whose names changed
// since the mount.
type dirState struct {
	durable map[string]entry // as of its last fsync, or of the mount
	pending []change         // since then, in order
}

// dirCreated starts tracking a new directory: nothing in it is durable.
func (m *model) dirCreated(ino uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs[ino] = &dirState{durable: map[string]entry{}}
}

// track is called, under m.names, before a name in the directory at path
// (inode ino) changes: if the directory was not tracked yet, its current
// names are durable.
func (m *model) track(ino uint64, path string) error {
	m.mu.Lock()
	_, ok := m.dirs[ino]
	m.mu.Unlock()
	if ok {
		return nil
	}
	list, err := listDir(path)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs[ino] = &dirState{durable: list}
	return nil
}

// logged records, under m.names, the edits of one name operation, whose
// directories are tracked.
func (m *model) logged(edits []edit) {
	if len(edits) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops++
	for _, e := range edits {
		d := m.dirs[e.dir]
		d.pending = append(d.pending, change{op: m.ops, name: e.name, to: e.to})
	}
}

// dirSynced makes the current names of the directory at path durable.
func (m *model) dirSynced(ino uint64, path string) error {
	m.names.Lock()
	defer m.names.Unlock()
	list, err := listDir(path)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs[ino] = &dirState{durable: list}
	return nil
}

// cutPoint picks how many of the name operations not yet durable survive
// a torn cut: it returns the number of the last surviving one, or 0 for
// none, each choice as likely.
func (m *model) cutPoint(rng *rand.Rand) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ops []int64
	for _, d := range m.dirs {
		for _, c := range d.pending {
			ops = append(ops, c.op)
		}
	}
	// Sorted, so that the pick depends on the seed alone, not on the
	// order of the map.
	slices.Sort(ops)
	ops = slices.Compact(ops)
	if i := rng.IntN(len(ops) + 1); i > 0 {
		return ops[i-1]
	}
	return 0
}

// durableDir returns the names of the directory ino that survive when the
// name operations up to number upTo do: those of its last fsync with its
// later changes up to upTo replayed. live is the path of the directory,
// whose names are durable if it is not tracked.
func (m *model) durableDir(ino uint64, live string, upTo int64) (map[string]entry, error) {
	m.mu.Lock()
	d, ok := m.dirs[ino]
	m.mu.Unlock()
	if !ok {
		return listDir(live)
	}
	if len(d.pending) == 0 || d.pending[0].op > upTo {
		return d.durable, nil
	}
	list := maps.Clone(d.durable)
	for _, c := range d.pending {
		if c.op > upTo {
			break
		}
		if c.to == (entry{}) {
			delete(list, c.name)
		} else {
			list[c.name] = c.to
		}
	}
	return list, nil
}
