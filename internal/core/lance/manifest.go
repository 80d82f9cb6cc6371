package lance

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/lance/lancefile"
	"github.com/walctl/walctl/internal/core/lance/lancepb"
	"github.com/walctl/walctl/internal/core/objstore"
)

// Fragment is one fragment of a version: its id, files and row count.
type Fragment = lancepb.Fragment

// Manifest is one version of a dataset as read from its manifest file.
type Manifest struct {
	// Version is the dataset version this manifest describes.
	Version uint64
	// Path is the manifest file's path.
	Path string
	// V2Naming tells whether the file is named {u64::MAX - v}.manifest; the
	// next version is created under the same naming.
	V2Naming bool
	// Timestamp is when the version was committed (zero if unrecorded).
	Timestamp time.Time
	// Config is the manifest's config map (never nil).
	Config map[string]string
	// Fragments are the version's fragments in order.
	Fragments []Fragment
	// WriterLibrary and WriterVersion name the software that wrote it.
	WriterLibrary, WriterVersion string
	// DataFormat is the data_format version string, e.g. "2.0" or "2.1".
	DataFormat string

	pb  *lancepb.Manifest
	raw []byte
}

// Schema returns the version's schema, or ErrUnsupportedType when it holds
// nested or unsupported fields.
func (m *Manifest) Schema() (*Schema, error) {
	s, err := lancefile.FromLance(m.pb.Fields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	return s, nil
}

// FileVersion returns the data-file format new files of this table must use.
func (m *Manifest) FileVersion() (FileVersion, error) {
	if m.DataFormat == "" {
		return 0, fmt.Errorf("%s: no data_format (legacy file format): %w", m.Path, ErrUnsupported)
	}
	v, err := lancefile.ParseVersion(m.DataFormat)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", m.Path, err)
	}
	return v, nil
}

// Rows returns the number of live rows (physical rows minus deleted ones).
func (m *Manifest) Rows() uint64 {
	var n uint64
	for _, f := range m.Fragments {
		n += f.PhysicalRows - f.DeletedRows
	}
	return n
}

// MaxFragmentID returns the highest fragment id ever used by the table, and
// false when none has been.
func (m *Manifest) MaxFragmentID() (uint64, bool) {
	max, ok := uint64(0), false
	if m.pb.MaxFragmentID != nil {
		max, ok = uint64(*m.pb.MaxFragmentID), true
	}
	for _, f := range m.Fragments {
		if !ok || f.ID > max {
			max, ok = f.ID, true
		}
	}
	return max, ok
}

// Transaction is the transaction recorded with a version.
type Transaction struct {
	// UUID identifies the transaction (walctl's TxnID).
	UUID string
	// ReadVersion is the version the transaction was built on.
	ReadVersion uint64
	// Operation names the operation: "append", "update_config", "overwrite",
	// "rewrite", "delete", ... or "op-<n>".
	Operation string
}

var opNames = map[int]string{
	lancepb.OpAppend: "append", lancepb.OpDelete: "delete", lancepb.OpOverwrite: "overwrite",
	lancepb.OpCreateIndex: "create_index", lancepb.OpRewrite: "rewrite",
	lancepb.OpUpdateConfig: "update_config", 108: "update", 106: "restore",
	107: "reserve_fragments", 105: "merge", 109: "project",
}

// Transaction returns the version's transaction, inline or from its
// _transactions file; ok is false when the version records none.
func (m *Manifest) Transaction(store objstore.Store) (txn Transaction, ok bool, err error) {
	var body []byte
	switch {
	case m.pb.TransactionSection != nil:
		body, err = readSection(m.raw, *m.pb.TransactionSection)
		if err != nil {
			return txn, false, fmt.Errorf("%s: transaction section: %w", m.Path, err)
		}
	case m.pb.TransactionFile != "":
		name := m.pb.TransactionFile
		if name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
			return txn, false, fmt.Errorf("%s: transaction file %q is not a file name: %w", m.Path, name, ErrCorruptManifest)
		}
		body, err = store.Get(context.Background(), "_transactions/"+name)
		if err != nil {
			return txn, false, fmt.Errorf("transaction of version %d: %w", m.Version, err)
		}
	default:
		return txn, false, nil
	}
	t, err := lancepb.DecodeTransaction(body)
	if err != nil {
		return txn, false, fmt.Errorf("%s: transaction: %w: %w", m.Path, ErrCorruptManifest, err)
	}
	name := opNames[t.Op]
	if name == "" {
		name = fmt.Sprintf("op-%d", t.Op)
	}
	return Transaction{UUID: t.UUID, ReadVersion: t.ReadVersion, Operation: name}, true, nil
}

// readSection returns the length-prefixed message at pos of a manifest file.
func readSection(raw []byte, pos uint64) ([]byte, error) {
	size := uint64(len(raw))
	if pos > size || size-pos < 4 { // no pos+4: a garbage pos near 2^64 wraps
		return nil, fmt.Errorf("offset %d beyond end of file (%d bytes): %w", pos, len(raw), ErrCorruptManifest)
	}
	n := uint64(binary.LittleEndian.Uint32(raw[pos:]))
	if n > size-pos-4 {
		return nil, fmt.Errorf("message at %d of %d bytes runs past end of file (%d bytes): %w", pos, n, len(raw), ErrCorruptManifest)
	}
	return raw[pos+4 : pos+4+n], nil
}

// parseManifest decodes a whole manifest file.
func parseManifest(path string, raw []byte) (*Manifest, error) {
	const tail = 16
	if len(raw) < tail || string(raw[len(raw)-4:]) != lancefile.Magic {
		return nil, fmt.Errorf("%s: %d bytes, no %q footer: %w", path, len(raw), lancefile.Magic, ErrCorruptManifest)
	}
	pos := binary.LittleEndian.Uint64(raw[len(raw)-tail:])
	body, err := readSection(raw, pos)
	if err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", path, err)
	}
	pb, err := lancepb.DecodeManifest(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrCorruptManifest, err)
	}
	m := &Manifest{
		Version: pb.Version, Path: path, Config: pb.Config, Fragments: pb.Fragments,
		WriterLibrary: pb.WriterLibrary, WriterVersion: pb.WriterVersion,
		DataFormat: pb.FormatVersion, pb: pb, raw: raw,
	}
	if pb.TimestampSeconds != 0 || pb.TimestampNanos != 0 {
		m.Timestamp = time.Unix(pb.TimestampSeconds, int64(pb.TimestampNanos)).UTC()
	}
	return m, nil
}

// encodeManifestFile lays out [txn][index section][manifest][footer] and
// sets the section offsets in pb.
func encodeManifestFile(pb *lancepb.Manifest, txn []byte, indexSection []byte) []byte {
	var out []byte
	putMsg := func(b []byte) uint64 {
		pos := uint64(len(out))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
		return pos
	}
	txnPos := putMsg(txn)
	pb.TransactionSection = &txnPos
	pb.TransactionFile = ""
	pb.IndexSection = nil
	if indexSection != nil {
		p := putMsg(indexSection)
		pb.IndexSection = &p
	}
	mpos := putMsg(pb.Encode())
	out = binary.LittleEndian.AppendUint64(out, mpos)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 2)
	return append(out, lancefile.Magic...)
}

func leU64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
