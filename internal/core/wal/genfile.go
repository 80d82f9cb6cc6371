package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
)

// Index records are fixed 32-byte little-endian records:
//
//	kind u32 | crc u32 | a u64 | b u64 | salt u32 | self u32
//
// where self is the CRC32C of the first 28 bytes. Kinds:
//
//	header: a = first position, b = creation time (unix ns), crc = CRC32C of
//	        the schema prefix of the data file; kind "WAL3" (salted, named
//	        after its first sync: see below), "WAL2" (salted, named at
//	        creation) or "WAL1" written before generation files were
//	        recycled (salt 0)
//	entry:  a = offset in the data file, b = length, crc = CRC32C of the bytes
//	seal:   a = final data file size (with end-of-stream), b = seal time
//	synced: a = highest position already durable when it was written
//
// A synced record is written with the first entry after each group sync. It
// lets recovery tell a torn tail (entries never acknowledged) from damage to
// acknowledged entries of the open generation, which is reported, not cut.
//
// Every record of a generation carries the salt of its header, a random
// number drawn when the generation is created. Generation files are
// recycled (recycle_gen.go): a new generation may overwrite the files of a
// trimmed one, whose records still follow the new ones until overwritten.
// A record that passes its checksum with another salt is such a leftover:
// the generation's index ends before it (liveIndex). An index without a
// salt (WAL1) was never written over another.
//
// A generation is created, or takes over a trimmed generation's files,
// under temporary names (new-<first>.idx, then new-<first>.arrows) and is
// renamed to its own names (gen-<first>.*) only after a sync covered its
// header and first entry; its positions are acknowledged only once a later
// sync made that rename durable. The name is thus the proof, outside the
// index, that the generation holds a durable entry: a crash leaves either
// temporary names (nothing in them was acknowledged: recovery removes them)
// or a generation whose header, schema prefix and first entry must be
// there, so that a missing or cut index, a damaged header or a missing data
// file is damage to report, never an unfinished creation to delete
// (DESIGN.md §3 rule 22). A WAL3 header marks such a generation; WAL1 and
// WAL2 generations were named at creation.
const (
	recSize     = 32
	kindHeader  = 0x57414c31 // "WAL1": no salt
	kindHeader2 = 0x57414c32 // "WAL2": salted
	kindHeader3 = 0x57414c33 // "WAL3": salted, named after its first sync
	kindEntry   = 2
	kindSeal    = 3
	kindSynced  = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

type idxRec struct {
	kind, crc uint32
	a, b      uint64
	salt      uint32
}

func (r idxRec) marshal() []byte {
	var buf [recSize]byte
	binary.LittleEndian.PutUint32(buf[0:], r.kind)
	binary.LittleEndian.PutUint32(buf[4:], r.crc)
	binary.LittleEndian.PutUint64(buf[8:], r.a)
	binary.LittleEndian.PutUint64(buf[16:], r.b)
	binary.LittleEndian.PutUint32(buf[24:], r.salt)
	binary.LittleEndian.PutUint32(buf[28:], crc32c(buf[:28]))
	return buf[:]
}

func unmarshalRec(b []byte) (idxRec, bool) {
	if len(b) < recSize || binary.LittleEndian.Uint32(b[28:]) != crc32c(b[:28]) {
		return idxRec{}, false
	}
	return idxRec{
		kind: binary.LittleEndian.Uint32(b[0:]),
		crc:  binary.LittleEndian.Uint32(b[4:]),
		a:    binary.LittleEndian.Uint64(b[8:]),
		b:    binary.LittleEndian.Uint64(b[16:]),
		salt: binary.LittleEndian.Uint32(b[24:]),
	}, true
}

func isHeader(kind uint32) bool {
	return kind == kindHeader || kind == kindHeader2 || kind == kindHeader3
}

// liveIndex returns the records of index b that belong to its generation:
// those before the first one that passes its checksum with a salt other
// than the header's (left by the trimmed generation whose files were
// recycled). An index without a valid header is returned whole.
func liveIndex(b []byte) []byte {
	hdr, ok := unmarshalRec(b)
	if !ok || !isHeader(hdr.kind) {
		return b
	}
	for i := recSize; i+recSize <= len(b); i += recSize {
		if r, ok := unmarshalRec(b[i:]); ok && r.salt != hdr.salt {
			return b[:i]
		}
	}
	return b
}

// entryMeta locates one entry in its generation's data file.
type entryMeta struct {
	off int64
	n   int64
	crc uint32
}

// gen is one generation of a shard. Entries are appended to ents under the
// shard mutex and never modified, so a reader may keep a copy of the slice.
type gen struct {
	first   uint64
	salt    uint32 // of every index record (0 in a WAL1 generation)
	ents    []entryMeta
	size    int64 // data file bytes (schema, entries, and EOS once sealed)
	idxSize int64
	// recycled is set when the files were a trimmed generation's: they
	// may be longer than what this generation wrote, and are cut to it
	// when it is sealed.
	recycled bool
	sealed   bool
	sealedAt time.Time
	openedAt time.Time
	marked   uint64 // highest position a synced record vouches for
	name     nameState
	// durable is how many bytes of the data file a completed sync
	// covered (the whole file for one found at open): what syncFailed
	// keeps.
	durable  int64
	data     *os.File // open generation only
	idx      *os.File
	dataPath string
	idxPath  string
}

func genName(first uint64) string { return fmt.Sprintf("gen-%020d", first) }

// tempPrefix starts the names of a generation before its first sync.
const tempPrefix = "new-"

func tempName(first uint64) string { return fmt.Sprintf("%s%020d", tempPrefix, first) }

// nameState says how far a generation is from its own, durable names.
type nameState int

const (
	nameTemp    nameState = iota // new-<first>.*: no sync covered its first entry yet
	nameRenamed                  // gen-<first>.*, the rename not yet durable
	nameDurable                  // gen-<first>.*, durably
)

func (g *gen) last() uint64 { return g.first + uint64(len(g.ents)) - 1 }

// newGen creates the files of a new open generation under its temporary
// names, or takes over the files of a trimmed one (reuse, when not nil),
// and writes their headers. The shard renames it once a sync covered its
// first entry (shard.nameCovered).
func newGen(dir string, first uint64, schemaBytes []byte, now time.Time, reuse *recycled) (*gen, error) {
	g := &gen{first: first, openedAt: now, salt: newSalt(reuse),
		dataPath: filepath.Join(dir, tempName(first)+".arrows"),
		idxPath:  filepath.Join(dir, tempName(first)+".idx")}
	if err := g.openFiles(reuse); err != nil {
		return nil, err
	}
	hdr := idxRec{kind: kindHeader3, crc: crc32c(schemaBytes), a: first, b: uint64(now.UnixNano()), salt: g.salt}.marshal()
	_, err := g.data.WriteAt(schemaBytes, 0)
	if err == nil {
		_, err = g.idx.WriteAt(hdr, 0)
	}
	if err != nil {
		g.closeFiles()
		return nil, err
	}
	g.size, g.idxSize = int64(len(schemaBytes)), recSize
	return g, nil
}

// newSalt draws a generation's salt: never 0 (a WAL1 index's) nor the salt
// of the index it overwrites.
func newSalt(reuse *recycled) uint32 {
	for {
		s := rand.Uint32()
		if s != 0 && (reuse == nil || s != reuse.salt) {
			return s
		}
	}
}

// openFiles creates g's files, or renames reuse's files to g's names: the
// index first, so that a crash never leaves a data file without its index
// (recovery takes a generation's data without an index for damage).
func (g *gen) openFiles(reuse *recycled) error {
	flag := os.O_RDWR | os.O_CREATE | os.O_EXCL
	if reuse != nil {
		flag = os.O_RDWR
		if err := os.Rename(reuse.base+".idx", g.idxPath); err != nil {
			return err
		}
		if err := os.Rename(reuse.base+".arrows", g.dataPath); err != nil {
			os.Remove(g.idxPath)
			return err
		}
		g.recycled = true
	}
	var err error
	if g.idx, err = os.OpenFile(g.idxPath, flag, 0o644); err != nil {
		return err
	}
	if g.data, err = os.OpenFile(g.dataPath, flag, 0o644); err != nil {
		g.idx.Close()
		os.Remove(g.idxPath)
		return err
	}
	return nil
}

// rename gives g its own names, the index first (recovery completes a
// rename a crash interrupted: renameTemp). The caller makes the directory
// durable before acknowledging g's positions.
func (g *gen) rename(dir string) error {
	idx, data := filepath.Join(dir, genName(g.first)+".idx"), filepath.Join(dir, genName(g.first)+".arrows")
	if err := os.Rename(g.idxPath, idx); err != nil {
		return err
	}
	g.idxPath = idx
	if err := os.Rename(g.dataPath, data); err != nil {
		return err
	}
	g.dataPath, g.name = data, nameRenamed
	return nil
}

func (g *gen) closeFiles() {
	if g.data != nil {
		g.data.Close()
		g.data = nil
	}
	if g.idx != nil {
		g.idx.Close()
		g.idx = nil
	}
}

// reopen opens a recovered open generation's files for appending.
func (g *gen) reopen() error {
	var err error
	if g.data, err = os.OpenFile(g.dataPath, os.O_RDWR, 0); err != nil {
		return err
	}
	if g.idx, err = os.OpenFile(g.idxPath, os.O_RDWR, 0); err != nil {
		g.data.Close()
		g.data = nil
		return err
	}
	return nil
}

// syncAll fdatasyncs files, and fsyncs dir when set, concurrently: the
// kernel can then fold them into one journal commit. The first file is
// synced on the calling goroutine, which then needs no other goroutine to
// be scheduled when the others have nothing left to do (on a busy process
// that scheduling delay is what an ACK would wait for).
func syncAll(files []*os.File, dir string) error {
	ch := make(chan error, len(files)+1)
	n := 0
	for _, f := range files[min(1, len(files)):] {
		n++
		go func() { ch <- durable.DataSync(f) }()
	}
	if dir != "" {
		n++
		go func() { ch <- durable.SyncDir(dir) }()
	}
	var err error
	if len(files) > 0 {
		err = durable.DataSync(files[0])
	}
	for ; n > 0; n-- {
		if e := <-ch; err == nil {
			err = e
		}
	}
	return err
}

// readFull reads exactly len(b) bytes at off.
func readFull(f *os.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
