package wal

import (
	"context"
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
)

// TestHostileEncodedEntries: an encoded entry that a replica receives from
// its leader (AppendEncoded, CheckEncoded) or reads back from disk, whose
// compressed body declares gigabytes, is refused as a schema mismatch by
// both decoders; decoding any hostile entry allocates within the entry's
// budget (twice its size plus 1 MiB). Before, the in-place decoder
// handed ZSTD bodies to arrow-go's decoder: a 376-byte entry declaring a
// 512 MiB window made it allocate 512 MiB. Each case runs in a child
// process with a bounded address space.
func TestHostileEncodedEntries(t *testing.T) {
	for _, c := range arrowchecktest.Hostile() {
		if c.Framing {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if !arrowchecktest.InChild(t) {
				return
			}
			e := openTest(t, t.TempDir(), Options{QuickOpen: true})
			ctx := context.Background()
			if _, err := e.CreateTable(ctx, "t", arrowchecktest.Int64Schema(), 1); err != nil {
				t.Fatal(err)
			}
			sb, err := EncodeSchema(arrowchecktest.Int64Schema())
			if err != nil {
				t.Fatal(err)
			}
			raw := c.Stream[len(arrowchecktest.Messages(c.Stream)[0].Meta)+8 : len(c.Stream)-8] // the batch message
			var checkErr, decodeErr error
			n := arrowchecktest.Allocated(func() {
				checkErr = e.CheckEncoded(ctx, "t", 0, raw)
				if rec, err := decodeEntry(sb, raw); err == nil {
					rec.Release()
				} else {
					decodeErr = err
				}
			})
			// A view column's counts do not matter read with the table's
			// int64 schema: the entry may then be a well-formed batch.
			if !c.Views && (!errors.Is(checkErr, ErrSchemaMismatch) || decodeErr == nil) {
				t.Errorf("CheckEncoded: %v; decodeEntry: %v; want both refused", checkErr, decodeErr)
			}
			if bound := uint64(2 * (4*len(raw) + 2<<20)); n > bound {
				t.Errorf("decoding a %d-byte entry twice allocated %d bytes, more than %d", len(raw), n, bound)
			}
		})
	}
}
