package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
)

// corruptError is an integrity failure found in a WAL file: the file, the
// byte in it and the WAL position concerned. It wraps ErrCorruptEntry.
type corruptError struct {
	File     string
	Offset   int64
	Position uint64
	Detail   string
	// last is the generation's last position when its index is intact and
	// sealed (only its data is damaged); 0 when unknown.
	last uint64
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("%s: byte %d (position %d): %s: %v", e.File, e.Offset, e.Position, e.Detail, ErrCorruptEntry)
}

func (e *corruptError) Unwrap() error { return ErrCorruptEntry }

func corruptAt(file string, off int64, pos uint64, format string, args ...any) *corruptError {
	return &corruptError{File: file, Offset: off, Position: pos, Detail: fmt.Sprintf(format, args...)}
}

// errAbandoned reports a last generation whose creation never completed
// and that provably holds no entry (provablyEmpty).
var errAbandoned = errors.New("abandoned generation")

// unreadable reports a generation file that cannot be read (an I/O error):
// like damage, it is contained to its shard and reported, never taken for
// an unfinished creation or a torn tail.
func unreadable(file string, off int64, pos uint64, err error) *corruptError {
	return corruptAt(file, off, pos, "cannot be read: %v", err)
}

// isReadError tells an I/O error from a file that is merely short.
func isReadError(err error) bool {
	return err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF)
}

// tailCut describes what recovery cut off the end of an open generation.
type tailCut struct {
	from       uint64 // first position cut
	entries    int    // entries with a readable index record that were cut
	dataBytes  int64  // bytes cut from the data file
	idxRecords int    // whole index records cut
	why        string // the first invalid thing found
	// leftovers is set when the files were a trimmed generation's and
	// every record of this one was intact: what was cut is the old
	// generation's leftovers (and at most an unfinished append).
	leftovers bool
}

// idxEvidence reads what an index file proves about acknowledgements: the
// highest position a readable synced record vouches for, and whether the
// file ends with a valid seal record (written only after a sync that covered
// every earlier generation of the shard).
func idxEvidence(b []byte) (synced uint64, sealed bool) {
	n := len(b) / recSize
	for i := 1; i < n; i++ {
		if r, ok := unmarshalRec(b[i*recSize:]); ok && r.kind == kindSynced {
			synced = max(synced, r.a)
		}
	}
	if n >= 2 {
		r, ok := unmarshalRec(b[(n-1)*recSize:])
		sealed = ok && r.kind == kindSeal
	}
	return synced, sealed
}

// genParts is what loadGen reads of one generation.
type genParts struct {
	raw      []byte // the index file (nil when missing)
	idx      []byte // its live records (liveIndex)
	idxLen   int64  // the index file's length
	data     *os.File
	dataSize int64
}

// loadGen reads a generation's index and checks it against its data file.
//
// A generation whose index ends with a valid seal record is sealed and must
// be wholly intact (verify also checks every entry's checksum): any failure
// is a *corruptError naming file, byte and position. Otherwise every entry
// is checked. If the stream is complete (every entry, then the end-of-stream
// marker) the seal is finished: the seal record, written after the sync
// that made the stream durable, was lost or torn by a crash (at most one
// index record may be unreadable, the last). Otherwise the first invalid
// entry starts a torn tail that is cut off — unless a synced record, in this
// generation or a later one, or a sealed later generation (both in
// laterAcked), or the generation's own name (a WAL3 generation is named only
// once its first entry is durable) proves a position in that tail
// acknowledged: that is damage, reported instead. A file that cannot be
// read is reported likewise. last tells whether an invalid header or schema
// prefix may be an abandoned creation (errAbandoned, only when
// provablyEmpty).
func loadGen(dir string, first uint64, schemaBytes []byte, last, verify bool, laterAcked uint64, now time.Time) (*gen, tailCut, error) {
	g := &gen{first: first, name: nameDurable,
		dataPath: filepath.Join(dir, genName(first)+".arrows"),
		idxPath:  filepath.Join(dir, genName(first)+".idx")}
	var gf genParts
	var err error
	if gf.raw, err = os.ReadFile(g.idxPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, tailCut{}, unreadable(g.idxPath, 0, first, err)
	}
	gf.idxLen = int64(len(gf.raw))
	gf.idx = liveIndex(gf.raw)
	if gf.data, err = os.Open(g.dataPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, tailCut{}, unreadable(g.dataPath, 0, first, err)
	}
	if gf.data != nil {
		defer gf.data.Close()
		st, err := gf.data.Stat()
		if err != nil {
			return nil, tailCut{}, unreadable(g.dataPath, 0, first, err)
		}
		gf.dataSize = st.Size()
	}
	synced, _ := idxEvidence(gf.idx)
	hdr, ok := unmarshalRec(gf.idx)
	ok = ok && isHeader(hdr.kind) && hdr.a == first && hdr.crc == crc32c(schemaBytes)
	if ok && gf.data != nil {
		prefix := make([]byte, len(schemaBytes))
		err := readFull(gf.data, prefix, 0)
		if isReadError(err) {
			return nil, tailCut{}, unreadable(g.dataPath, 0, first, err)
		}
		ok = err == nil && string(prefix) == string(schemaBytes)
	}
	if !ok || gf.data == nil {
		if last && provablyEmpty(first, gf, len(schemaBytes)) {
			return nil, tailCut{}, errAbandoned
		}
		if gf.raw == nil {
			return nil, tailCut{}, corruptAt(g.idxPath, 0, first, "index missing beside a data file of %d bytes", gf.dataSize)
		}
		return nil, tailCut{}, corruptAt(g.idxPath, 0, first, "generation header or schema prefix invalid")
	}
	g.openedAt, g.salt = time.Unix(0, int64(hdr.b)), hdr.salt
	acked := max(laterAcked, synced)
	if hdr.kind == kindHeader3 {
		acked = max(acked, first) // named only once its first entry was durable
	}
	return checkGen(g, gf, schemaBytes, verify, acked, last && hdr.kind != kindHeader3, now)
}

// provablyEmpty tells whether the last generation, whose header or schema
// prefix is invalid or whose data file is missing, provably holds no entry
// (DESIGN.md §3 rule 22): a WAL3 generation never does (it was named once
// its first entry was durable); otherwise no index record of its own may
// vouch for a position or validate against the data, and the data may hold
// nothing past the schema prefix — unless the index is another (WAL1 or
// WAL2) generation's, taken over from a trimmed generation whose header
// was never rewritten, whose data is that generation's.
// Anything else is damage to report. An acknowledged entry's index record
// and data were durable together, so nothing less proves an entry; a crash
// leaves WAL3 generations under temporary names, which recovery removes
// before this is asked.
func provablyEmpty(first uint64, gf genParts, prefixLen int) bool {
	hdr, ok := unmarshalRec(gf.raw)
	ok = ok && isHeader(hdr.kind)
	own, foreign := ok && hdr.a == first, ok && hdr.a != first
	if ok && hdr.kind == kindHeader3 {
		// A WAL3 file gets its generation's name only once its own
		// header is durable: another generation's is damage.
		return false
	}
	for i := recSize; i+recSize <= len(gf.raw); i += recSize {
		r, ok := unmarshalRec(gf.raw[i:])
		if !ok || own && r.salt != hdr.salt || foreign && r.salt == hdr.salt {
			continue // not this generation's
		}
		switch r.kind {
		case kindSynced, kindSeal:
			return false
		case kindEntry:
			if gf.data != nil && r.b > 0 && r.a < uint64(gf.dataSize) && r.b <= uint64(gf.dataSize)-r.a {
				b := make([]byte, r.b)
				if err := readFull(gf.data, b, int64(r.a)); err != nil || crc32c(b) == r.crc {
					return false // an entry, or bytes that cannot be read
				}
			}
		}
	}
	// Another generation's index (a trimmed generation's files taken over
	// at WAL2, the new header never written): its data is that
	// generation's.
	return foreign || gf.data == nil || gf.dataSize <= int64(prefixLen)
}

// indexWalk is what walkIndex found: where the entries end in the data
// file, how many index records after the header were accepted, and the
// first invalid thing (bad, at index record badRec), if any.
type indexWalk struct {
	off      int64
	consumed int
	// entries is how many of the consumed records precede the last
	// entry record's end, and marked the highest position their synced
	// records vouch for: a synced record is written with the entry after
	// it, so one with no entry after it belongs to an append that was
	// cut, and may itself never have reached the disk.
	entries int
	marked  uint64
	bad     *corruptError
	badRec  int
	ioErr   bool // bad is a read error: damage wherever it is
}

// verifyBufs pools walkIndex's entry buffer: an open reads every entry of
// every generation (8 MiB each by default), and a buffer per generation
// made the open allocate a third of the WAL's size (memory that is slow to
// touch on some VMs).
var verifyBufs sync.Pool

// walkIndex checks g's index records in order against the data file,
// starting at off (after the schema prefix), filling g.ents, and stops at
// the first invalid one. Entries are checksummed when verify or when the
// generation is not sealed.
func walkIndex(g *gen, gf genParts, off int64, verify, sealed bool) indexWalk {
	w := indexWalk{off: off, badRec: -1}
	nFull := len(gf.idx) / recSize
	bp, _ := verifyBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer verifyBufs.Put(bp)
	buf := *bp
	for i := 1; i < nFull && w.bad == nil; i++ {
		recOff := int64(i) * recSize
		pos := g.first + uint64(len(g.ents))
		r, ok := unmarshalRec(gf.idx[recOff:])
		switch {
		case !ok:
			w.bad = corruptAt(g.idxPath, recOff, pos, "index record %d fails its checksum", i)
		case g.sealed:
			w.bad = corruptAt(g.idxPath, recOff, pos, "index record %d follows the seal record", i)
		case r.kind == kindEntry:
			ok := r.a == uint64(w.off) && r.b > 0 && r.b <= uint64(gf.dataSize-w.off)
			if ok && (verify || !sealed) { // unsealed: always checked
				if uint64(cap(buf)) < r.b {
					// Grown geometrically (bounded by the file's size, as
					// r.b is): an entry a little larger than every one
					// before must not cost a new buffer each time.
					buf = make([]byte, min(max(r.b, 2*uint64(cap(buf))), uint64(gf.dataSize-w.off)))
					*bp = buf
				}
				b := buf[:r.b]
				err := readFull(gf.data, b, w.off)
				if isReadError(err) {
					w.bad, w.ioErr = unreadable(g.dataPath, w.off, pos, err), true
					break
				}
				ok = err == nil && crc32c(b) == r.crc
			}
			if !ok {
				w.bad = corruptAt(g.dataPath, w.off, pos, "entry at offset %d length %d (index record %d) fails its checksum or lies outside the file", r.a, r.b, i)
				break
			}
			g.ents = append(g.ents, entryMeta{off: w.off, n: int64(r.b), crc: r.crc})
			w.off += int64(r.b)
		case r.kind == kindSeal:
			tail := make([]byte, len(eos))
			err := readFull(gf.data, tail, w.off)
			if isReadError(err) {
				w.bad, w.ioErr = unreadable(g.dataPath, w.off, pos, err), true
				break
			}
			if r.a != uint64(w.off)+uint64(len(eos)) || gf.dataSize != int64(r.a) || err != nil || string(tail) != string(eos) {
				w.bad = corruptAt(g.dataPath, w.off, pos, "sealed generation has %d bytes and its entries end at %d, seal record says %d", gf.dataSize, w.off, r.a)
				break
			}
			g.sealed, g.sealedAt = true, time.Unix(0, int64(r.b))
			w.off = int64(r.a)
		case r.kind == kindSynced:
			g.marked = max(g.marked, r.a)
		default:
			w.bad = corruptAt(g.idxPath, recOff, pos, "unknown index record kind %d", r.kind)
		}
		if w.bad == nil {
			w.consumed++
			if r.kind == kindEntry {
				w.entries, w.marked = w.consumed, g.marked
			}
		} else {
			w.badRec = i
		}
	}
	return w
}

// checkGen walks a generation's index records against its data file (see
// loadGen); acked is the highest position known to be acknowledged. With
// proveEmpty (the last generation, of a format named at creation) keeping
// none of its entries requires the data to hold nothing of its own past
// the schema prefix (provablyEmpty's rule).
func checkGen(g *gen, gf genParts, schemaBytes []byte, verify bool, acked uint64, proveEmpty bool, now time.Time) (*gen, tailCut, error) {
	_, sealed := idxEvidence(gf.idx)
	nFull := len(gf.idx) / recSize
	w := walkIndex(g, gf, int64(len(schemaBytes)), verify, sealed)
	consumed, bad, badRec, off := w.consumed, w.bad, w.badRec, w.off
	if w.ioErr {
		return nil, tailCut{}, bad
	}
	if sealed {
		if bad == nil && len(gf.idx)%recSize != 0 {
			bad = corruptAt(g.idxPath, int64(nFull)*recSize, g.first+uint64(len(g.ents)), "partial index record after the seal record")
		}
		if bad != nil {
			bad.last = sealedLast(g.first, gf.idx)
			return nil, tailCut{}, bad
		}
		g.size, g.idxSize = off, int64(len(gf.idx))
		return g, tailCut{}, nil
	}
	// Unsealed. A complete stream whose only flaw is its last index record
	// (a seal record the crash tore, garbled or zeroed): finish the seal.
	if (bad == nil || badRec == nFull-1 && bad.File == g.idxPath) && gf.dataSize == off+int64(len(eos)) {
		if err := finishSeal(g, off, gf.dataSize, consumed, gf.data, now); err == nil {
			g.idxSize = int64(2+consumed) * recSize
			return g, tailCut{}, nil
		} else if !errors.Is(err, errNoEOS) {
			return nil, tailCut{}, err
		}
	}
	end := g.first + uint64(len(g.ents)) // first position not kept
	if len(g.ents) == 0 && proveEmpty && ownBytesPastPrefix(gf, off) {
		return nil, tailCut{}, corruptAt(g.dataPath, off, g.first, "no index record describes the %d bytes past the schema prefix", gf.dataSize-off)
	}
	if end <= acked {
		if bad != nil {
			bad.Detail += fmt.Sprintf(" (position %d was acknowledged: this is damage, not a torn tail)", acked)
			return nil, tailCut{}, bad
		}
		return nil, tailCut{}, corruptAt(g.dataPath, off, end, "generation ends before acknowledged position %d", acked)
	}
	// The index ends with the last entry kept: a synced record after it
	// belongs to an append that was cut, and may hold no durable bytes (a
	// failed fsync): the next append's records go in its place.
	g.size, g.idxSize, g.marked = off, int64(1+w.entries)*recSize, w.marked
	cut := tailCut{from: end, dataBytes: gf.dataSize - off, idxRecords: nFull - 1 - w.entries}
	if bad != nil {
		cut.why = bad.Error()
	}
	cut.leftovers = bad == nil && gf.idxLen > int64(len(gf.idx))
	for i := max(badRec, 1); badRec >= 0 && i < nFull; i++ {
		if r, ok := unmarshalRec(gf.idx[i*recSize:]); !ok || r.kind == kindEntry {
			cut.entries++ // an unreadable record may have been an entry's
		}
	}
	if gf.dataSize != g.size || gf.idxLen != g.idxSize {
		if err := truncateGen(g); err != nil {
			return nil, tailCut{}, err
		}
	}
	return g, cut, nil
}

// ownBytesPastPrefix tells whether a generation's data file holds bytes past
// its schema prefix (ending at off) other than a trimmed generation's
// leftovers: the first leftover index record (after the live ones)
// describes an entry right there whose checksum matches.
func ownBytesPastPrefix(gf genParts, off int64) bool {
	if gf.dataSize <= off {
		return false
	}
	left := gf.raw[len(gf.idx):]
	r, ok := unmarshalRec(left)
	if !ok || r.kind != kindEntry || r.a != uint64(off) || r.b == 0 || r.b > uint64(gf.dataSize-off) {
		return true
	}
	b := make([]byte, r.b)
	return readFull(gf.data, b, off) != nil || crc32c(b) != r.crc
}

// sealedLast returns the last position of a sealed generation whose index
// records all pass their checksums (the index alone then says how many
// entries it holds), or 0.
func sealedLast(first uint64, idx []byte) uint64 {
	if len(idx)%recSize != 0 {
		return 0
	}
	n := uint64(0)
	for i := recSize; i < len(idx); i += recSize {
		r, ok := unmarshalRec(idx[i:])
		if !ok {
			return 0
		}
		if r.kind == kindEntry {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return first + n - 1
}

var errNoEOS = errors.New("no end-of-stream marker")

// finishSeal writes the seal record of a generation whose data file ends
// with the end-of-stream marker right after its entries (at off), over
// whatever torn record followed the last one consumed. The data file is
// synced first: the stream may be complete only in the page cache (a
// process killed before its sync), and a seal record vouches for a durable
// stream.
func finishSeal(g *gen, off, dataSize int64, consumed int, data *os.File, now time.Time) error {
	tail := make([]byte, len(eos))
	if readFull(data, tail, off) != nil || string(tail) != string(eos) {
		return errNoEOS
	}
	if err := durable.DataSync(data); err != nil {
		return fmt.Errorf("finish seal of %s: %w", g.dataPath, err)
	}
	f, err := os.OpenFile(g.idxPath, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	rec := idxRec{kind: kindSeal, a: uint64(dataSize), b: uint64(now.UnixNano()), salt: g.salt}.marshal()
	if _, err := f.WriteAt(rec, int64(1+consumed)*recSize); err != nil {
		return err
	}
	if err := f.Truncate(int64(2+consumed) * recSize); err != nil {
		return err
	}
	if err := durable.SyncFile(f); err != nil {
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
			err = durable.SyncFile(fh)
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
