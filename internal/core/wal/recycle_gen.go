package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Generation files are recycled. On a file system, an fdatasync that
// follows writes into a file's existing blocks only has to write those
// blocks, while one that follows writes extending the file must also
// commit the file's new size and blocks (a journal commit on ext4 and XFS;
// on thin-provisioned virtual disks, new blocks in the image too). So the
// files of trimmed generations are not deleted but kept, a few per shard,
// as recycled-<first>.arrows and .idx, and the next generations are
// written over them (as RocksDB's recycled logs and PostgreSQL's WAL
// segments are). The leftovers of the old generation are told apart by the
// salt of the index records (genfile.go); its data past the new entries is
// never read, and a generation's files are cut to its own bytes when it is
// sealed, so a sealed generation is again exactly an Arrow IPC stream.
//
// A read that opened a generation's file before its trim may still be
// reading it: each read holds a ticket (shard.reading) and trimmed files
// are reused only once every read that started before the trim ended.

const recycledPrefix = "recycled-"

// recycled is a trimmed generation's pair of files kept for reuse.
type recycled struct {
	base  string // path without the extension
	salt  uint32 // of its index header
	after uint64 // reads with tickets up to this one may still use it
}

// recycledCap is how many trimmed generations a shard keeps for reuse.
func (e *Engine) recycledCap() int {
	switch n := e.opts.RecycledGenerations; {
	case n < 0:
		return 0
	case n == 0:
		return DefaultRecycledGenerations
	default:
		return n
	}
}

// startRead registers a read (mu held) and returns its ticket.
func (s *shard) startRead() uint64 {
	s.readSeq++
	if s.reading == nil {
		s.reading = map[uint64]struct{}{}
	}
	s.reading[s.readSeq] = struct{}{}
	return s.readSeq
}

func (s *shard) endRead(ticket uint64) {
	s.mu.Lock()
	delete(s.reading, ticket)
	s.mu.Unlock()
}

// takeRecycled removes and returns (mu held) the first kept generation no
// read can still be using, or nil.
func (s *shard) takeRecycled() *recycled {
	oldest := s.readSeq + 1
	for t := range s.reading {
		oldest = min(oldest, t)
	}
	for i, r := range s.free {
		if r.after < oldest {
			s.free = append(s.free[:i:i], s.free[i+1:]...)
			return r
		}
	}
	return nil
}

// keepTrimmed renames a trimmed generation's files for reuse when the shard
// keeps fewer than its cap (after: the last read ticket issued before the
// trim), and reports whether it did; the caller deletes them otherwise.
func (s *shard) keepTrimmed(g *gen, after uint64) bool {
	s.mu.Lock()
	full := len(s.free)+s.keeping >= s.e.recycledCap()
	if !full {
		s.keeping++
	}
	s.mu.Unlock()
	if full {
		return false
	}
	r := &recycled{base: filepath.Join(s.dir, fmt.Sprintf("%s%020d", recycledPrefix, g.first)), salt: g.salt, after: after}
	err := os.Rename(g.dataPath, r.base+".arrows")
	if err == nil {
		if err = os.Rename(g.idxPath, r.base+".idx"); err != nil {
			os.Remove(r.base + ".arrows")
		}
	}
	s.mu.Lock()
	s.keeping--
	if err == nil {
		s.free = append(s.free, r)
	}
	s.mu.Unlock()
	return err == nil
}

// parseRecycledName returns the base name of a kept generation's file.
func parseRecycledName(n string) (string, bool) {
	base, ok := strings.CutSuffix(n, ".arrows")
	if !ok {
		base, ok = strings.CutSuffix(n, ".idx")
	}
	if !ok {
		return "", false
	}
	_, isGen := parseGenName("gen-" + strings.TrimPrefix(base, recycledPrefix) + ".idx")
	return base, isGen && strings.HasPrefix(base, recycledPrefix)
}

// loadRecycled takes the kept generations found at open (bases: file base
// names, each with how many of its two files exist): complete pairs up to
// the cap are kept, the rest deleted.
func (s *shard) loadRecycled(bases map[string]int) error {
	for b, n := range bases {
		base := filepath.Join(s.dir, b)
		if n == 2 && len(s.free) < s.e.recycledCap() {
			r := &recycled{base: base}
			if f, err := os.Open(base + ".idx"); err == nil {
				hdr := make([]byte, recSize)
				if readFull(f, hdr, 0) == nil {
					if h, ok := unmarshalRec(hdr); ok {
						r.salt = h.salt
					}
				}
				f.Close()
			}
			s.free = append(s.free, r)
			continue
		}
		for _, p := range []string{base + ".arrows", base + ".idx"} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}
