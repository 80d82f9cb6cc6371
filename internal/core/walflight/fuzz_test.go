package walflight

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
)

// FuzzDoPutDecode feeds DoPut's decoding (readPut, the server's loop over
// the FlightData of a stream) with arbitrary Arrow IPC bytes, split into
// messages as a producer sends them, and validates every batch that comes
// out as the engine does. Properties: nothing panics; a refusal is
// InvalidArgument; the process allocates within the budgets of the
// messages (arrowcheck.MessageBudget each, plus decodeOverhead) and the
// allocator never hands out more than one message's budget. The seeds are
// well-formed streams (plain, LZ4, ZSTD, views, every stored type) and the
// hostile ones (compressed bodies declaring 1 TiB, ZSTD bombs, huge and
// negative variadic counts, huge framing lengths).
func FuzzDoPutDecode(f *testing.F) {
	for _, s := range seedStreams() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		arrowchecktest.LimitFuzzWorker(t)
		fds := flightData(stream, putDescriptor("t", 0))
		sum, most := budgetOf(fds)
		alloc := arrowcheck.NewAllocator(0)
		var err error
		n := arrowchecktest.Allocated(func() {
			err = readPut(context.Background(), recvFrom(fds), alloc, func(_ string, _ int, rec arrow.RecordBatch) error {
				if err := arrowcheck.Batch(rec.Schema(), rec); err != nil && strings.Contains(err.Error(), "validator panic") {
					t.Fatalf("validator panicked: %v", err)
				}
				return nil
			})
		})
		if err != nil && status.Code(err) != codes.InvalidArgument {
			t.Fatalf("refusal %v is not InvalidArgument", err)
		}
		if n > uint64(sum+decodeOverhead) || alloc.Peak() > most {
			t.Fatalf("%d bytes in %d messages: allocated %d (allocator peak %d), budgets %d (at most %d a message)",
				len(stream), len(fds), n, alloc.Peak(), sum, most)
		}
	})
}

// seedStreams are the seeds of the decoding fuzz targets.
func seedStreams() [][]byte {
	_, all := arrowchecktest.AllTypes()
	out := [][]byte{arrowchecktest.Valid(), all, arrowchecktest.StringViews(),
		arrowchecktest.CompressedInt64s(), arrowchecktest.CompressedInt64s(ipc.WithLZ4()),
		arrowchecktest.CompressedInt64s(ipc.WithZstd())}
	for _, c := range arrowchecktest.Hostile() {
		out = append(out, c.Stream)
	}
	return out
}
