package ingest_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/ingest"
)

// FuzzDecode feeds `wal append`'s decoder with arbitrary input (Arrow IPC
// streams and files, JSON lines). Properties: nothing panics; a refusal is
// errs.ErrInvalid and returns no batch; the process allocates within
// DecodeBudget of the input (plus decodeOverhead). The seeds are
// well-formed streams (plain, LZ4, ZSTD, views, every stored type), JSON
// lines and the hostile streams of arrowchecktest.
func FuzzDecode(f *testing.F) {
	_, all := arrowchecktest.AllTypes()
	for _, s := range [][]byte{arrowchecktest.Valid(), all, arrowchecktest.StringViews(),
		arrowchecktest.CompressedInt64s(), arrowchecktest.CompressedInt64s(ipc.WithLZ4()),
		arrowchecktest.CompressedInt64s(ipc.WithZstd()), []byte("{\"id\": 1}\n{\"id\": 2}\n")} {
		f.Add(s)
	}
	for _, c := range arrowchecktest.Hostile() {
		f.Add(c.Stream)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		arrowchecktest.LimitFuzzWorker(t)
		var err error
		n := arrowchecktest.Allocated(func() {
			var out []arrow.RecordBatch
			out, err = ingest.Decode(data, ingest.FormatAuto, arrowchecktest.Int64Schema(), 64)
			if err != nil && out != nil {
				t.Errorf("batches returned with %v", err)
			}
			ingest.Release(out)
		})
		if err != nil && !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("refusal %v is not ErrInvalid", err)
		}
		if bound := uint64(arrowcheck.DecodeBudget(len(data)) + decodeOverhead); n > bound {
			t.Fatalf("decoding %d bytes allocated %d, more than %d", len(data), n, bound)
		}
	})
}
