package powerfs

import (
	"math/rand/v2"
	"os"
)

const (
	// pageSize is the unit of writeback: a dirty page is written whole,
	// not at all, or (the power failing during the write) torn.
	pageSize = 4096
	// sectorSize is the unit a disk writes atomically: a torn page keeps
	// some of its sectors.
	sectorSize = 512
)

// tear lets part of what changed in the file since its last fsync reach
// the disk, as a power cut on ext4 (data=ordered, delayed allocation) may.
// live is a path of the file in the old tree.
//
// Data: each dirty page is written back whole, not at all, or torn, some
// of its sectors kept; only bytes written since the last fsync (and the
// zeros a truncation left in the page holding its point) ever reach the
// image.
//
// Size: the file's size on disk is updated as writeback proceeds (ext4's
// i_disksize), so it may be the durable size, the live size, any sector
// boundary between, or (rarely) any byte between: the size at the moment
// a page holding the file's end was written back, a file ending inside a
// record. Bytes below the surviving size whose data did not survive read
// as zeros: data=ordered never exposes stale blocks.
//
// Truncation: a truncation since the last fsync is journaled, and commits
// (before any later size change) or not:
//   - committed: the bytes it cut are gone, reading as zeros where the
//     size covers them again; the size lies between the smallest size it
//     was truncated to and the live size; pages written after it may
//     survive.
//   - not committed: the durable size and the durable bytes beyond the
//     truncation point survive (the freed blocks are not reused before
//     the commit, and writes there went to new blocks, whose allocation is
//     journaled after it). Only the pages below the truncation point and
//     the one holding it, overwritten in place, may reach the disk; the
//     latter with the zeros the truncation left in its tail.
//
// Whether the truncation committed is drawn apart from the prefix of name
// operations that survives (see names.go): the journal orders them, the
// model allows more, as POSIX does. Several truncations since the last
// fsync commit or not together; bytes written before a truncation and cut
// by it are not kept by the model, so they never reappear.
func (fst *fileState) tear(live string, rng *rand.Rand) error {
	fst.mu.Lock()
	defer fst.mu.Unlock()
	if len(fst.dirty) == 0 && fst.minSize < 0 {
		return nil
	}
	src, err := os.Open(live)
	if err != nil {
		return err
	}
	defer src.Close()
	img, err := os.OpenFile(fst.img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	lst, err := src.Stat()
	if err != nil {
		return err
	}
	ist, err := img.Stat()
	if err != nil {
		return err
	}
	durable, liveSize := ist.Size(), lst.Size()
	dirty, lo, hi := merged(fst.dirty), min(durable, liveSize), max(durable, liveSize)
	if fst.minSize >= 0 {
		if rng.IntN(2) == 0 { // not committed
			inPlace := min(roundUp(fst.minSize, pageSize), durable)
			if fst.minSize < inPlace {
				dirty = merged(append(dirty, extent{fst.minSize, inPlace}))
			}
			dirty = clip(dirty, inPlace)
			lo, hi = durable, durable
		} else { // committed
			if err := img.Truncate(fst.minSize); err != nil {
				return err
			}
			lo, hi = fst.minSize, max(fst.minSize, liveSize)
		}
	}
	size := tornSize(lo, hi, rng)
	buf := make([]byte, copyBuf)
	for _, r := range writtenBack(clip(dirty, size), rng) {
		if err := copyRange(img, src, r.off, r.end, buf); err != nil {
			return err
		}
	}
	return img.Truncate(size)
}

// tornSize picks the surviving size of a file whose size on disk may lie
// anywhere in [lo, hi].
func tornSize(lo, hi int64, rng *rand.Rand) int64 {
	if lo == hi {
		return lo
	}
	first, last := lo/sectorSize+1, (hi-1)/sectorSize // sector boundaries inside
	switch r := rng.IntN(8); {
	case r < 2:
		return lo
	case r < 4 || first > last:
		return hi
	case r < 7:
		return (first + rng.Int64N(last-first+1)) * sectorSize
	default:
		return lo + 1 + rng.Int64N(hi-lo)
	}
}

// writtenBack picks the parts of the dirty extents (sorted, disjoint) that
// reached the disk: each page written whole, not at all or torn, each of
// its sectors then kept or not. The parts are returned sorted, adjacent
// ones joined.
func writtenBack(dirty []extent, rng *rand.Rand) []extent {
	var out []extent
	page, whole, torn := int64(-1), false, false
	sector, keep := int64(-1), false
	for _, e := range dirty {
		for s := e.off / sectorSize * sectorSize; s < e.end; s += sectorSize {
			// An extent may share its first page and sector with the one
			// before: they were drawn then.
			if p := s / pageSize * pageSize; p != page {
				page = p
				switch rng.IntN(3) {
				case 0:
					whole, torn = false, false
				case 1:
					whole, torn = true, false
				case 2:
					whole, torn = false, true
				}
			}
			if s != sector {
				sector, keep = s, whole || torn && rng.IntN(2) == 0
			}
			if !keep {
				continue
			}
			r := extent{max(s, e.off), min(s+sectorSize, e.end)}
			if k := len(out); k > 0 && out[k-1].end == r.off {
				out[k-1].end = r.end
				continue
			}
			out = append(out, r)
		}
	}
	return out
}

// clip returns the parts of the extents (sorted, disjoint) below end.
func clip(dirty []extent, end int64) []extent {
	var out []extent
	for _, e := range dirty {
		if e.off >= end {
			break
		}
		out = append(out, extent{e.off, min(e.end, end)})
	}
	return out
}

func roundUp(n, unit int64) int64 { return (n + unit - 1) / unit * unit }
