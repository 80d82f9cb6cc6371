package arrowcheck_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
)

// TestStreamReaderBoundsDeclaredLengths: a header declaring 2 GiB of
// metadata (or a body past the end) is refused without allocating it
// (FuzzBatch found that arrow-go's ipc.NewReader allocates it first).
func TestStreamReaderBoundsDeclaredLengths(t *testing.T) {
	valid := arrowchecktest.Valid()
	for name, data := range map[string][]byte{
		"metadata":  {0xff, 0xff, 0xff, 0xff, 0xf0, 0xff, 0xff, 0x7f, 1, 2, 3},
		"truncated": valid[:len(valid)-200],
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := arrowcheck.NewStreamReader(data)
		if err == nil {
			for r.Next() {
			}
			err = r.Err()
			r.Release()
		}
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "bytes are left") {
			t.Errorf("%s: got %v, want a refusal naming the bytes left", name, err)
		}
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
			t.Errorf("%s: reading allocated %d bytes", name, grown)
		}
	}
	r, err := arrowcheck.NewStreamReader(valid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() || r.RecordBatch().NumRows() != arrowchecktest.Rows || !bytes.Equal(valid, arrowchecktest.Valid()) {
		t.Fatalf("valid stream: %v", r.Err())
	}
	if r.Next() {
		t.Fatal("a second batch")
	}
}

// TestStreamReaderReadsIPCFiles: an Arrow IPC file is read through the
// stream it embeds.
func TestStreamReaderReadsIPCFiles(t *testing.T) {
	src, err := arrowcheck.NewStreamReader(arrowchecktest.Valid())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(src.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2 && src.Next(); i++ {
		if err := w.Write(src.RecordBatch()); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(src.RecordBatch()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := arrowcheck.NewStreamReader(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	n := 0
	for r.Next() {
		if err := arrowcheck.Batch(arrowchecktest.Schema(), r.RecordBatch()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 || r.Err() != nil {
		t.Fatalf("read %d batches of 2: %v", n, r.Err())
	}
}
