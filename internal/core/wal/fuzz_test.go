package wal

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The fuzz targets below feed the decoders what a crash or an attacker may
// leave in a WAL directory. They must return an error (or a consistent
// result), never panic or allocate beyond the input's size. Their corpora
// (testdata/fuzz/<name>/) hold files the engine wrote and damaged variants;
// `go test` runs them as ordinary tests, `go test -fuzz FuzzX` explores.

// FuzzLoadGen: a generation's index and data files.
func FuzzLoadGen(f *testing.F) {
	sb := mustSchemaBytes(f)
	f.Add([]byte{}, []byte{}, true)
	f.Fuzz(func(t *testing.T, idx, data []byte, last bool) {
		first := uint64(1)
		if len(idx) >= recSize {
			first = max(binary.LittleEndian.Uint64(idx[8:]), 1)
		}
		dir := t.TempDir()
		base := filepath.Join(dir, genName(first))
		if err := os.WriteFile(base+".idx", idx, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+".arrows", data, 0o644); err != nil {
			t.Fatal(err)
		}
		g, _, err := loadGen(dir, first, sb, last, true, 0, time.Unix(0, 0))
		var ce *corruptError
		switch {
		case err == errAbandoned || errors.As(err, &ce) && errors.Is(err, ErrCorruptEntry):
			return
		case err != nil:
			t.Fatalf("loadGen: unexpected kind of error %v", err)
		}
		// What recovery keeps must read back: every entry inside the
		// (possibly truncated) data file, with its checksum.
		b, err := os.ReadFile(base + ".arrows")
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != g.size {
			t.Fatalf("data file is %d bytes, generation says %d", len(b), g.size)
		}
		for i, m := range g.ents {
			if m.off < 0 || m.off+m.n > int64(len(b)) || crc32c(b[m.off:m.off+m.n]) != m.crc {
				t.Fatalf("entry %d (%+v) does not read back", i, m)
			}
			if rec, err := decodeEntryOwned(sb, append([]byte(nil), b[m.off:m.off+m.n]...), nil); err == nil {
				rec.Release()
			}
		}
	})
}

// FuzzDecodeEntry: one stored entry, as Read decodes it after its checksum
// (which an attacker can recompute) matched.
func FuzzDecodeEntry(f *testing.F) {
	sb := mustSchemaBytes(f)
	rec := makeRecord(1, 3)
	enc, err := encodeEntry("t", testSchema, sb, rec)
	rec.Release()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte(nil), enc.raw...))
	enc.release()
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, err := decodeEntryOwned(sb, raw, nil)
		if err == nil {
			rec.Release()
		}
	})
}

// FuzzDecodeTableFile: a table registration record (table.json).
func FuzzDecodeTableFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"name":"t","shards":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tf, schema, err := decodeTableFile("table.json", "t", b)
		if err != nil {
			if !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("error %v does not wrap ErrCorruptEntry", err)
			}
			return
		}
		if schema == nil || tf.Name != "t" || validateShards(tf.Shards) != nil {
			t.Fatalf("accepted %+v", tf)
		}
	})
}

// FuzzParseUint: a counter file (epoch, trimmed).
func FuzzParseUint(f *testing.F) {
	for _, s := range []string{"0\n", "18446744073709551615\n", "-1", "", " 7 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseUint("epoch", b); err != nil && !errors.Is(err, ErrCorruptEntry) {
			t.Fatalf("error %v does not wrap ErrCorruptEntry", err)
		}
	})
}

// FuzzDecodeQuarantineRecord: a quarantine's audit record (AUDIT.json),
// which recovery reads back.
func FuzzDecodeQuarantineRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"wal-quarantine","schema_version":1,"table":"t","shard":0,"generation":1,"first":1,"last":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeQuarantineRecord(b)
		if err == nil && (r.First == 0 || r.Last < r.First || ValidateName(r.Table) != nil) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

// TestDecodeMutatedInputs decodes a few thousand seeded mutations of a
// valid entry and schema message: before decodes were bounded
// (decodeguard.go, arrowcheck), some asked arrow-go for 168 GB (an entry's
// body length) or hundreds of GB (a field's children count) and killed the
// process.
func TestDecodeMutatedInputs(t *testing.T) {
	sb := mustSchemaBytes(t)
	rec := makeRecord(1, 3)
	enc, err := encodeEntry("t", testSchema, sb, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	raw := append([]byte(nil), enc.raw...)
	enc.release()
	r := rand.New(rand.NewSource(1))
	mutate := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		for k := 0; k <= r.Intn(4); k++ {
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
		return b
	}
	for i := 0; i < 3000; i++ {
		if rec, err := decodeEntryOwned(sb, mutate(raw), nil); err == nil {
			rec.Release()
		}
		if _, err := DecodeSchema(mutate(sb)); err != nil && !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("schema decode error %v does not wrap ErrSchemaMismatch", err)
		}
	}
}
