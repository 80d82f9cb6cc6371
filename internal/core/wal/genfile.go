package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Index records are fixed 32-byte little-endian records:
//
//	kind u32 | crc u32 | a u64 | b u64 | reserved u32 | self u32
//
// where self is the CRC32C of the first 28 bytes. Kinds:
//
//	header: a = first position, b = creation time (unix ns), crc = CRC32C of
//	        the schema prefix of the data file
//	entry:  a = offset in the data file, b = length, crc = CRC32C of the bytes
//	seal:   a = final data file size (with end-of-stream), b = seal time
//	synced: a = highest position already durable when it was written
//
// A synced record is written with the first entry after each group sync. It
// lets recovery tell a torn tail (entries never acknowledged) from damage to
// acknowledged entries of the open generation, which is reported, not cut.
const (
	recSize    = 32
	kindHeader = 0x57414c31 // "WAL1"
	kindEntry  = 2
	kindSeal   = 3
	kindSynced = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

type idxRec struct {
	kind, crc uint32
	a, b      uint64
}

func (r idxRec) marshal() []byte {
	var buf [recSize]byte
	binary.LittleEndian.PutUint32(buf[0:], r.kind)
	binary.LittleEndian.PutUint32(buf[4:], r.crc)
	binary.LittleEndian.PutUint64(buf[8:], r.a)
	binary.LittleEndian.PutUint64(buf[16:], r.b)
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
	}, true
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
	first    uint64
	ents     []entryMeta
	size     int64 // data file bytes (schema, entries, and EOS once sealed)
	idxSize  int64
	sealed   bool
	sealedAt time.Time
	openedAt time.Time
	marked   uint64   // highest position a synced record vouches for
	data     *os.File // open generation only
	idx      *os.File
	dataPath string
	idxPath  string
}

func genName(first uint64) string { return fmt.Sprintf("gen-%020d", first) }

func (g *gen) last() uint64 { return g.first + uint64(len(g.ents)) - 1 }

// newGen creates the files of a new open generation and writes their
// headers. The caller syncs them, and the directory, before writing entries
// (see shard.rotateLocked).
func newGen(dir string, first uint64, schemaBytes []byte, now time.Time) (*gen, error) {
	g := &gen{first: first, openedAt: now,
		dataPath: filepath.Join(dir, genName(first)+".arrows"),
		idxPath:  filepath.Join(dir, genName(first)+".idx")}
	var err error
	if g.data, err = os.OpenFile(g.dataPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return nil, err
	}
	if g.idx, err = os.OpenFile(g.idxPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		g.data.Close()
		os.Remove(g.dataPath)
		return nil, err
	}
	hdr := idxRec{kind: kindHeader, crc: crc32c(schemaBytes), a: first, b: uint64(now.UnixNano())}.marshal()
	if _, err = g.data.WriteAt(schemaBytes, 0); err == nil {
		_, err = g.idx.WriteAt(hdr, 0)
	}
	if err != nil {
		g.closeFiles()
		return nil, err
	}
	g.size, g.idxSize = int64(len(schemaBytes)), recSize
	return g, nil
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

// errAbandoned reports a last generation whose creation never completed
// (header or schema prefix missing): it cannot hold an ACKed entry.
var errAbandoned = errors.New("abandoned generation")

// loadGen reads a generation's index and checks it against its data file.
// A sealed generation must be wholly intact (verify also checks every
// entry's checksum); any failure is ErrCorruptEntry naming file and
// position. A generation without a seal record is checked entry by entry:
// if its stream is complete the seal is finished (a seal record lost in a
// crash); otherwise the invalid tail (a torn write) is cut off and the
// files truncated — unless a synced record, in this generation or a later
// one (laterAcked), vouches for a position in that tail: that is damage to
// acknowledged data and is reported instead. last tells whether a missing
// header may be an abandoned creation (errAbandoned).
func loadGen(dir string, first uint64, schemaBytes []byte, last, verify bool, laterAcked uint64, now time.Time) (*gen, int, error) {
	g := &gen{first: first,
		dataPath: filepath.Join(dir, genName(first)+".arrows"),
		idxPath:  filepath.Join(dir, genName(first)+".idx")}
	corrupt := func(file string, pos uint64, format string, args ...any) error {
		return fmt.Errorf("%s (position %d): %s: %w", file, pos, fmt.Sprintf(format, args...), ErrCorruptEntry)
	}
	idxb, err := os.ReadFile(g.idxPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, err
	}
	data, err := os.Open(g.dataPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, err
	}
	if data != nil {
		defer data.Close()
	}
	hdr, ok := unmarshalRec(idxb)
	prefix := make([]byte, len(schemaBytes))
	if ok && data != nil {
		_, err := data.ReadAt(prefix, 0)
		ok = err == nil && hdr.kind == kindHeader && hdr.a == first && hdr.crc == crc32c(schemaBytes) && string(prefix) == string(schemaBytes)
	}
	if !ok || data == nil {
		if last {
			return nil, 0, errAbandoned
		}
		return nil, 0, corrupt(g.idxPath, first, "generation header or schema prefix invalid")
	}
	st, err := data.Stat()
	if err != nil {
		return nil, 0, err
	}
	dataSize := st.Size()
	g.openedAt = time.Unix(0, int64(hdr.b))
	// First pass: the index records up to the first unreadable one. A
	// generation whose last readable record is a seal record is sealed and
	// is checked strictly.
	var recs []idxRec
	acked := laterAcked // highest position any synced record vouches for
	torn := false
	for i := 1; (i+1)*recSize <= len(idxb); i++ {
		r, ok := unmarshalRec(idxb[i*recSize:])
		if ok && r.kind == kindSynced {
			acked = max(acked, r.a)
		}
		if !ok {
			torn = true
		} else if !torn {
			recs = append(recs, r)
		}
	}
	sealed := len(recs) > 0 && recs[len(recs)-1].kind == kindSeal
	strict := sealed
	if strict && (len(recs)+1)*recSize != len(idxb) {
		return nil, 0, corrupt(g.idxPath, first+uint64(min(len(recs), len(idxb)/recSize)), "index record %d unreadable", len(recs)+1)
	}
	off := int64(len(schemaBytes))
	var buf []byte
	cut := false
	consumed := 0
	for _, r := range recs {
		pos := first + uint64(len(g.ents))
		if g.sealed {
			return nil, 0, corrupt(g.idxPath, pos, "record after the seal record")
		}
		switch r.kind {
		case kindEntry:
			ok := int64(r.a) == off && r.b > 0 && off+int64(r.b) <= dataSize
			if ok && (verify || !sealed) { // unsealed: always checked
				if uint64(cap(buf)) < r.b {
					buf = make([]byte, r.b)
				}
				b := buf[:r.b]
				ok = readFull(data, b, off) == nil && crc32c(b) == r.crc
			}
			if !ok {
				if strict || pos <= acked {
					return nil, 0, corrupt(g.dataPath, pos, "entry at offset %d length %d fails its checksum or lies outside the file", r.a, r.b)
				}
				cut = true
				break
			}
			g.ents = append(g.ents, entryMeta{off: off, n: int64(r.b), crc: r.crc})
			off += int64(r.b)
		case kindSeal:
			tail := make([]byte, len(eos))
			err := readFull(data, tail, off)
			if int64(r.a) != off+int64(len(eos)) || dataSize != int64(r.a) || err != nil || string(tail) != string(eos) {
				return nil, 0, corrupt(g.dataPath, pos, "sealed generation has %d bytes, seal record says %d", dataSize, r.a)
			}
			g.sealed, g.sealedAt = true, time.Unix(0, int64(r.b))
			off = int64(r.a)
		case kindSynced:
			g.marked = max(g.marked, r.a)
		default:
			return nil, 0, corrupt(g.idxPath, pos, "unknown index record kind %d", r.kind)
		}
		if cut {
			break
		}
		consumed++
	}
	if !g.sealed && !cut && !torn && dataSize == off+int64(len(eos)) {
		// A complete stream without a seal record: a seal whose record
		// did not reach the disk. Every entry checked out, so finish it.
		if err := finishSeal(g, off, dataSize, consumed, data, now); err == nil {
			consumed++
		} else if !errors.Is(err, errNoEOS) {
			return nil, 0, err
		}
		off = g.size
	}
	if !g.sealed && first+uint64(len(g.ents)) <= acked {
		return nil, 0, corrupt(g.idxPath, first+uint64(len(g.ents)), "generation ends before acknowledged position %d", acked)
	}
	g.size, g.idxSize = off, int64(1+consumed)*recSize
	if g.sealed {
		return g, 0, nil
	}
	dropped := 0
	if dataSize != g.size || int64(len(idxb)) != g.idxSize {
		dropped = max(1, (len(idxb)/recSize)-1-consumed)
		if err := truncateGen(g); err != nil {
			return nil, 0, err
		}
	}
	return g, dropped, nil
}

var errNoEOS = errors.New("no end-of-stream marker")

// finishSeal writes the seal record of a generation whose data file ends
// with the end-of-stream marker right after its entries (at off).
func finishSeal(g *gen, off, dataSize int64, consumed int, data *os.File, now time.Time) error {
	tail := make([]byte, len(eos))
	if readFull(data, tail, off) != nil || string(tail) != string(eos) {
		return errNoEOS
	}
	f, err := os.OpenFile(g.idxPath, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	rec := idxRec{kind: kindSeal, a: uint64(dataSize), b: uint64(now.UnixNano())}.marshal()
	if _, err := f.WriteAt(rec, int64(1+consumed)*recSize); err != nil {
		return err
	}
	if err := f.Truncate(int64(2+consumed) * recSize); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("finish seal of %s: %w", g.idxPath, err)
	}
	g.sealed, g.sealedAt, g.size = true, now, dataSize
	return nil
}

// truncateGen cuts an open generation's files back to its whole entries.
func truncateGen(g *gen) error {
	for _, f := range []struct {
		path string
		size int64
	}{{g.dataPath, g.size}, {g.idxPath, g.idxSize}} {
		fh, err := os.OpenFile(f.path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = fh.Truncate(f.size)
		if err == nil {
			err = fh.Sync()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("truncate torn tail of %s: %w", f.path, err)
		}
	}
	return nil
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
		go func() { ch <- fdatasync(f) }()
	}
	if dir != "" {
		n++
		go func() { ch <- syncDir(dir) }()
	}
	var err error
	if len(files) > 0 {
		err = fdatasync(files[0])
	}
	for ; n > 0; n-- {
		if e := <-ch; err == nil {
			err = e
		}
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
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

// maxSynced returns the highest position vouched for by a readable synced
// record in an index file (0 if none or unreadable).
func maxSynced(idxPath string) uint64 {
	b, err := os.ReadFile(idxPath)
	if err != nil {
		return 0
	}
	var m uint64
	for i := recSize; i+recSize <= len(b); i += recSize {
		if r, ok := unmarshalRec(b[i:]); ok && r.kind == kindSynced {
			m = max(m, r.a)
		}
	}
	return m
}
