package powerfs

import (
	"io"
	"math/rand/v2"
	"os"
)

// pageSize is the unit in which written-back data reaches the disk.
const pageSize = 4096

// tear lets part of what was written to the file since its last fsync reach
// the disk, as a real power loss may: each page of the dirty extents is kept
// or not at random, and the file's new size is kept or not independently
// (pages beyond the surviving size are invisible; a grown size without its
// pages reads as zeros). A file truncated since its last fsync is not torn:
// its rollback is clean. live is a path of the file in the old tree.
func (fst *fileState) tear(live string, rng *rand.Rand) error {
	fst.mu.Lock()
	defer fst.mu.Unlock()
	if len(fst.dirty) == 0 || fst.minSize >= 0 {
		return nil
	}
	src, err := os.Open(live)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	img, err := os.OpenFile(fst.img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	ist, err := img.Stat()
	if err != nil {
		return err
	}
	size := ist.Size()
	if rng.IntN(2) == 0 {
		size = st.Size()
	}
	buf := make([]byte, pageSize)
	for _, e := range fst.dirty {
		for page := e.off / pageSize * pageSize; page < min(e.end, size); page += pageSize {
			if rng.IntN(2) == 0 {
				continue
			}
			from, to := max(page, e.off), min(page+pageSize, e.end, size)
			n, err := src.ReadAt(buf[:to-from], from)
			if err != nil && err != io.EOF {
				return err
			}
			if _, err := img.WriteAt(buf[:n], from); err != nil {
				return err
			}
		}
	}
	return img.Truncate(size)
}
