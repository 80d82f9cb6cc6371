package lancepb

import (
	"bytes"
	"testing"
)

// A manifest keeps fields walctl does not model (here base_paths, 18, and an
// unknown 99) and re-encodes parent fragments byte for byte.
func TestManifestRoundTripKeepsUnknownFields(t *testing.T) {
	var e Enc
	frag := Fragment{ID: 7, PhysicalRows: 3, Files: []DataFile{{Path: "a.lance", Fields: []int32{0, 1}, ColumnIndices: []int32{0, 1}, Major: 2, SizeBytes: 99}}}
	e.OptBytes(2, frag.Encode())
	e.Uint(3, 5)
	e.Message(18, func(s *Enc) { s.String(4, "s3://elsewhere") })
	e.String(99, "future")
	e.StringMap(16, map[string]string{"k": "v"}, []string{"k"})
	m, err := DecodeManifest(e.B)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 5 || len(m.Fragments) != 1 || m.Fragments[0].ID != 7 || m.Fragments[0].Files[0].SizeBytes != 99 || m.Config["k"] != "v" || len(m.Other) != 2 {
		t.Fatalf("decoded %+v", m)
	}
	again, err := DecodeManifest(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Fragments[0].Encode(), frag.Encode()) || len(again.Other) != 2 || !bytes.Equal(again.Other[1], m.Other[1]) {
		t.Fatalf("round trip lost data: %+v", again)
	}
	if _, err := DecodeManifest([]byte{0x0a, 0xff}); err == nil {
		t.Fatal("truncated manifest parsed")
	}
}
