package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// TestEncodedEntriesLandAsAppendsDo: what Encode makes on one engine,
// AppendEncoded stores on another as Append would have (same positions,
// same rows), and Encode refuses what Append refuses.
func TestEncodedEntriesLandAsAppendsDo(t *testing.T) {
	ctx := context.Background()
	leader, replica := openTest(t, t.TempDir(), Options{MaxGenerationBytes: 4096}), openTest(t, t.TempDir(), Options{MaxGenerationBytes: 4096})
	mustCreate(t, leader, "t", 1)
	mustCreate(t, replica, "t", 1)
	var raws [][]byte
	for i := 0; i < 30; i++ {
		rec := testRecord(t, int64(i*10), 10)
		enc, err := leader.Encode(ctx, "t", 0, rec)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, bytes.Clone(enc.Raw))
		enc.Release()
		if _, err := leader.Append(ctx, "t", 0, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	pos, err := replica.AppendEncoded(ctx, "t", 0, raws)
	if err != nil || len(pos) != 30 || pos[0] != 1 || pos[29] != 30 {
		t.Fatalf("positions %v, %v", pos, err)
	}
	want, got := readRecords(t, leader, 1, 30), readRecords(t, replica, 1, 30)
	for i := range want {
		if !array.RecordEqual(want[i], got[i]) {
			t.Fatalf("entry %d differs: %v vs %v", i+1, want[i], got[i])
		}
	}
	if gens, _ := replica.Generations(ctx, "t", 0); len(gens) < 2 {
		t.Fatalf("a 4 KiB generation limit did not rotate within the encoded batch: %+v", gens)
	}
	foreign := int32Record(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil))
	defer foreign.Release()
	if _, err := leader.Encode(ctx, "t", 0, foreign); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("Encode of another schema: %v", err)
	}
	if _, err := leader.Encode(ctx, "nope", 0, foreign); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("Encode for an unknown table: %v", err)
	}
}

// TestAppendEncodedRefusesWhatIsNotAnEntryOfTheTable: a truncated entry,
// one with bytes after it, another table's entry, one with inconsistent
// arrays and one over the size limit are refused before anything is
// written, even beside valid ones.
func TestAppendEncodedRefusesWhatIsNotAnEntryOfTheTable(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, t.TempDir(), Options{MaxEntryBytes: 64 << 10})
	mustCreate(t, e, "t", 1)
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}, {Name: "y", Type: arrow.PrimitiveTypes.Int32}}, nil)
	if _, err := e.CreateTable(ctx, "u", other, 1); err != nil {
		t.Fatal(err)
	}
	rec := testRecord(t, 0, 10)
	defer rec.Release()
	enc, err := e.Encode(ctx, "t", 0, rec)
	if err != nil {
		t.Fatal(err)
	}
	good := bytes.Clone(enc.Raw)
	enc.Release()
	big := testRecord(t, 0, 5000)
	defer big.Release()
	cases := map[string]struct {
		raw  []byte
		want error
	}{
		"truncated":       {good[:len(good)-8], ErrSchemaMismatch},
		"trailing bytes":  {append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 0), ErrSchemaMismatch},
		"not a message":   {[]byte("hello, not arrow"), ErrSchemaMismatch},
		"empty":           {nil, ErrSchemaMismatch},
		"bad offsets":     {damagedOffsets(t, good), ErrSchemaMismatch},
		"invalid UTF-8":   {invalidUTF8(t, good), arrowcheck.ErrMalformed},
		"over the limit":  {rawOf(t, e, big), ErrBadRange},
		"another table's": {rawFor(t, other), ErrSchemaMismatch},
	}
	for name, c := range cases {
		if _, err := e.AppendEncoded(ctx, "t", 0, [][]byte{good, c.raw}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		if err := e.CheckEncoded(ctx, "t", 0, c.raw); !errors.Is(err, c.want) {
			t.Errorf("%s: CheckEncoded %v, want %v", name, err, c.want)
		}
	}
	if st, _ := e.Stats(ctx, "t", nil); st.Shards[0].LastPosition != 0 {
		t.Fatalf("refused batches wrote: last position %d", st.Shards[0].LastPosition)
	}
	if err := e.CheckEncoded(ctx, "t", 0, good); err != nil {
		t.Fatalf("CheckEncoded of a valid entry: %v", err)
	}
}

// readRecords reads entries from..to (retained by the caller's test).
func readRecords(t *testing.T, e *Engine, from, to uint64) []arrow.RecordBatch {
	t.Helper()
	var out []arrow.RecordBatch
	err := e.Read(context.Background(), "t", 0, from, to, func(en Entry) error {
		en.Record.Retain()
		out = append(out, en.Record)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	return out
}

// damagedOffsets is good (an entry of testRecord(0, 10)) with its string
// column's last offset pointing past the string data.
func damagedOffsets(t *testing.T, good []byte) []byte {
	t.Helper()
	offs := make([]byte, 4*11)
	for i := range 11 {
		binary.LittleEndian.PutUint32(offs[4*i:], uint32(9*i)) // "payload-x" is 9 bytes
	}
	at := bytes.Index(good, offs)
	if at < 0 {
		t.Fatal("the string offsets are not in the encoded entry")
	}
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[at+40:], 900)
	return bad
}

// invalidUTF8 is good with its first string's last byte made 0xff.
func invalidUTF8(t *testing.T, good []byte) []byte {
	t.Helper()
	at := bytes.Index(good, []byte("payload-a"))
	if at < 0 {
		t.Fatal("the strings are not in the encoded entry")
	}
	bad := bytes.Clone(good)
	bad[at+8] = 0xff
	return bad
}

// rawOf encodes rec for table t of e without the engine's validation and
// size limit, as a faulty leader might.
func rawOf(t *testing.T, e *Engine, rec arrow.RecordBatch) []byte {
	t.Helper()
	tb, err := e.table("t")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(testSchema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes()[len(tb.schemaBytes):])
}

// int32Record is a one-row record of schema, whose fields are all int32.
func int32Record(schema *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, f := range b.Fields() {
		f.(*array.Int32Builder).Append(7)
	}
	return b.NewRecordBatch()
}

// rawFor is the entry of a one-row record of schema (all int32 fields).
func rawFor(t *testing.T, schema *arrow.Schema) []byte {
	t.Helper()
	rec := int32Record(schema)
	defer rec.Release()
	sb, err := EncodeSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes()[len(sb):])
}
