package walraft

import (
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/errs"
)

// TestDecodeHostileCommandPayload: an append logged as an Arrow IPC stream
// (opAppend, from older leaders) or a registration's schema comes from a
// peer. A few hundred bytes declaring gigabytes (compressed bodies, view
// counts, framing lengths) are refused as corrupt without allocating more
// than the decode budget of their size. Each case runs in a child process
// with a bounded address space: before, arrow-go allocated what they
// declared.
func TestDecodeHostileCommandPayload(t *testing.T) {
	for _, c := range arrowchecktest.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			if !arrowchecktest.InChild(t) {
				return
			}
			var err error
			n := arrowchecktest.Allocated(func() {
				rec, rerr := decodeRecord(c.Stream)
				if rec != nil {
					rec.Release()
				}
				err = rerr
			})
			if bound := uint64(arrowcheck.DecodeBudget(len(c.Stream)) + 2<<20); n > bound {
				t.Errorf("decoding %d bytes allocated %d bytes, more than %d", len(c.Stream), n, bound)
			}
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Errorf("decode: %v, want a corrupt command", err)
			}
		})
	}
}
