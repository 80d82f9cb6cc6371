package powerfs

import "sync"

// syncFaults is the plan of fsync failures of a file system. It belongs to
// the FS, not to a generation: a plan outlives power cuts.
type syncFaults struct {
	mu    sync.Mutex
	match func(rel string) bool
	left  int // failures still to inject; negative: until cleared
	fired int
}

// FailSync makes fsync and fdatasync fail with EIO on the files and
// directories whose path relative to the mount ("" for the root, and for
// a file with no name left) satisfies match: the next n such calls, or
// every one until the next FailSync when n is negative. FailSync(nil, 0)
// clears the plan. The plan replaces the previous one, resets
// SyncFailures, and holds across power cuts. match is called with a lock
// held: it must not call the FS.
//
// A failing file fsync has Linux's semantics (since 4.13, on ext4 and
// xfs): the data dirty at that moment is marked clean without reaching
// the disk, so a power cut loses it, while reads return it from the page
// cache until then; a later fsync succeeds and makes durable only what
// was written after the failure.
//
// A failing directory fsync makes none of the directory's names durable
// and leaves them as they were: a torn cut may still keep them, and a
// later directory fsync, if it does not fail too, makes them durable.
// (ext4 would abort its journal and refuse every later change; a caller
// must already handle an fsync error without relying on what follows, and
// a plan with n < 0 models a disk that keeps failing.)
//
// FailSync is safe to call while the mount is in use, by this process or
// by others: the fsync calls of every process reach the FUSE server here.
func (f *FS) FailSync(match func(rel string) bool, n int) {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	if match == nil {
		n = 0
	}
	f.faults.match, f.faults.left, f.faults.fired = match, n, 0
}

// SyncFailures is the number of fsync and fdatasync calls failed since the
// last FailSync: a harness checks with it that a planned fault fired.
func (f *FS) SyncFailures() int {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	return f.faults.fired
}

// fire reports whether the fsync of the file or directory at rel fails,
// counting the failure.
func (s *syncFaults) fire(rel func() string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 || !s.match(rel()) {
		return false
	}
	if s.left > 0 {
		s.left--
	}
	s.fired++
	return true
}
