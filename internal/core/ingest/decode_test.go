package ingest_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/ingest"
)

// decodeOverhead is what a decode may allocate beyond its budget: arrow-go's
// readers, records and arrays, a ZSTD decoder's tables.
const decodeOverhead = 2 << 20

// TestDecodeHostileInput: `wal append`'s input of a few hundred bytes whose
// compressed body, view column or framing declares gigabytes is refused as
// invalid (exit 2) naming what is wrong, and its decode allocates no more
// than DecodeBudget of its size. Before, arrow-go allocated what the input
// declared: the process died ("fatal error: out of memory") on a 1 TiB LZ4
// or ZSTD buffer or a 2^40 variadic buffer count, and a 376-byte ZSTD
// window made it allocate 512 MiB. Each case runs in a child process with
// a bounded address space (arrowchecktest.InChild).
func TestDecodeHostileInput(t *testing.T) {
	for _, c := range arrowchecktest.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			if !arrowchecktest.InChild(t) {
				return
			}
			var (
				out []arrow.RecordBatch
				err error
			)
			n := arrowchecktest.Allocated(func() {
				out, err = ingest.Decode(c.Stream, ingest.FormatAuto, arrowchecktest.Int64Schema(), 1024)
			})
			ingest.Release(out)
			if bound := uint64(arrowcheck.DecodeBudget(len(c.Stream)) + decodeOverhead); n > bound {
				t.Errorf("decoding %d bytes allocated %d bytes, more than %d", len(c.Stream), n, bound)
			}
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.Want) || out != nil {
				t.Errorf("got %d batches, %v; want ErrInvalid naming %q", len(out), err, c.Want)
			}
		})
	}
}

// TestDecodeCompressedInput: compressed streams a producer writes (LZ4, as
// Feather files are, and ZSTD) still decode to the batch they hold.
func TestDecodeCompressedInput(t *testing.T) {
	want := arrowchecktest.CompressedInt64s()
	for name, opt := range map[string]ipc.Option{"lz4": ipc.WithLZ4(), "zstd": ipc.WithZstd()} {
		t.Run(name, func(t *testing.T) {
			stream := arrowchecktest.CompressedInt64s(opt)
			if bytes.Equal(stream, want) {
				t.Fatal("the stream is not compressed")
			}
			out, err := ingest.Decode(stream, ingest.FormatArrow, arrowchecktest.Int64Schema(), 1024)
			if err != nil || len(out) != 1 {
				t.Fatalf("got %d batches, %v", len(out), err)
			}
			defer ingest.Release(out)
			if got := arrowchecktest.Encode(arrowchecktest.Int64Schema(), out[0]); !bytes.Equal(got, want) {
				t.Fatal("the decoded batch differs from the one compressed")
			}
		})
	}
}
