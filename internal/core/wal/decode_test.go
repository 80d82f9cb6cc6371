package wal

import (
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestDecodeInPlace checks that an entry decodes without a copy of its body
// (the record's buffers point into the entry's bytes) to the same record
// as the copying decode.
func TestDecodeInPlace(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 100 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append("row")
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	sb, err := EncodeSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encodeEntry("t", schema, sb, rec)
	if err != nil {
		t.Fatal(err)
	}
	raw := append([]byte(nil), enc.raw...)
	enc.release()

	want, err := decodeEntry(sb, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	got := decodeInPlace(sb, raw, nil)
	if got == nil {
		t.Fatal("decodeInPlace fell back")
	}
	defer got.Release()
	if !array.RecordEqual(got, want) {
		t.Fatalf("in place %v, copied %v", got, want)
	}
	ids := got.Column(0).Data().Buffers()[1].Bytes()
	start, end := uintptr(unsafe.Pointer(&raw[0])), uintptr(unsafe.Pointer(&raw[len(raw)-1]))
	if p := uintptr(unsafe.Pointer(&ids[0])); p < start || p > end {
		t.Fatal("decoded buffer does not point into the entry's bytes")
	}
	// Anything but a framed record batch falls back to the copying decode.
	if decodeInPlace(sb, raw[:5], nil) != nil || decodeInPlace(sb, sb, nil) != nil {
		t.Fatal("decodeInPlace accepted a truncated or non-record message")
	}
	if _, err := decodeEntryOwned(sb, raw[:len(raw)/2], nil); err == nil {
		t.Fatal("a truncated entry decoded")
	}
}
