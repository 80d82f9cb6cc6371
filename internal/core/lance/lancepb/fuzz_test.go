package lancepb

import "testing"

// FuzzDecoders feeds the same bytes to every message decoder walctl uses
// on what it reads from disk: none may panic, and a manifest, transaction,
// file descriptor or column metadata that decodes re-encodes to bytes that
// decode again.
func FuzzDecoders(f *testing.F) {
	frag := Fragment{ID: 7, PhysicalRows: 3, Files: []DataFile{{Path: "a.lance", Fields: []int32{0, 1}, ColumnIndices: []int32{0, 1}, Major: 2, SizeBytes: 99}}}
	field := Field{Name: "id", ID: 0, ParentID: -1, LogicalType: "int64"}
	m := Manifest{Fields: []Field{field}, Fragments: []Fragment{frag}, Version: 3, Config: map[string]string{"walctl.epoch": "1"}, FormatVersion: "2.0"}
	txn := Transaction{ReadVersion: 2, UUID: "u", Op: OpAppend, AppendFragments: []Fragment{frag}}
	cm := ColumnMetadata{Pages: []Page{{BufferOffsets: []uint64{0}, BufferSizes: []uint64{8}, Length: 1, Encoding: EncodeAny(TypeURLArrayEncoding, Flat20(64, 0).Encode())}}}
	for _, seed := range [][]byte{m.Encode(), txn.Encode(), frag.Encode(), field.Encode(), cm.Encode(),
		(&FileDescriptor{Fields: []Field{field}, Length: 1}).Encode(), Flat20(32, 1).Encode(),
		(&PageLayout{Kind: LayoutMiniBlock, Value: Flat21(64)}).Encode()} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		DecodeField(b)
		DecodeFragment(b)
		DecodeArrayEncoding(b)
		DecodeCompressive(b)
		DecodePageLayout(b)
		DecodeAny(b)
		if m, err := DecodeManifest(b); err == nil {
			if _, err := DecodeManifest(m.Encode()); err != nil {
				t.Fatalf("manifest does not re-decode: %v", err)
			}
		}
		if x, err := DecodeTransaction(b); err == nil {
			if _, err := DecodeTransaction(x.Encode()); err != nil {
				t.Fatalf("transaction does not re-decode: %v", err)
			}
		}
		if d, err := DecodeFileDescriptor(b); err == nil {
			if _, err := DecodeFileDescriptor(d.Encode()); err != nil {
				t.Fatalf("file descriptor does not re-decode: %v", err)
			}
		}
		if c, err := DecodeColumnMetadata(b); err == nil {
			if _, err := DecodeColumnMetadata(c.Encode()); err != nil {
				t.Fatalf("column metadata does not re-decode: %v", err)
			}
		}
	})
}
