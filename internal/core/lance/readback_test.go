package lance

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
)

// TestWalctlReadsBackEveryType writes every supported type, nullable or not,
// in both file formats and reads it back with walctl: sliced batches (non-zero
// offsets, unaligned bitmaps), tiny pages (one or two rows, all-null pages)
// and pages large enough for many 2.1 mini-block chunks and full-zip pages.
func TestWalctlReadsBackEveryType(t *testing.T) {
	for _, fv := range []FileVersion{FileVersion2_0, FileVersion2_1} {
		t.Run(fv.String(), func(t *testing.T) {
			s := allTypes()
			d := newDataset(t, s, fv)
			r1, _ := batch(s, 0, 70)
			defer r1.Release()
			full, _ := batch(s, 70, 50)
			defer full.Release()
			r2 := full.NewSlice(3, 50)
			defer r2.Release()
			big, _ := batch(s, 200, 3005)
			defer big.Release()
			r3 := big.NewSlice(5, 3005)
			defer r3.Release()
			files := []struct {
				pageBytes int
				recs      []arrow.Record
			}{
				{64, []arrow.Record{r1, r2}},
				{64 << 10, []arrow.Record{r3}},
			}
			m, _ := d.Latest()
			schema, _ := m.Schema()
			var descs []Descriptor
			for _, f := range files {
				w, err := d.CreateFile(schema, FileOptions{Version: fv, MaxPageBytes: f.pageBytes})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range f.recs {
					if err := w.Write(r); err != nil {
						t.Fatal(err)
					}
				}
				if f.pageBytes > 64 {
					// As streamed preparation does: finish (twice is
					// harmless), then close, which syncs.
					for range 2 {
						if err := w.Finish(); err != nil {
							t.Fatal(err)
						}
					}
				}
				desc, err := w.Close()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Close(); !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("second Close: %v", err)
				}
				if err := w.Finish(); !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("Finish after Close: %v", err)
				}
				if err := d.VerifyFile(desc); err != nil {
					t.Fatal(err)
				}
				descs = append(descs, desc)
			}
			appendFiles(t, d, nil, descs...)
			var got []arrow.Record
			err := d.Scan(context.Background(), ScanOptions{}, func(r arrow.Record) error {
				r.Retain()
				got = append(got, r)
				return nil
			})
			if err != nil || len(got) != 2 || got[0].NumRows() != 117 || got[1].NumRows() != 3000 {
				t.Fatalf("scan: %d records, %v", len(got), err)
			}
			defer got[0].Release()
			defer got[1].Release()
			for i, f := range s.Fields() {
				want, err := array.Concatenate([]arrow.Array{r1.Column(i), r2.Column(i)}, memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				if !array.Equal(want, got[0].Column(i)) {
					t.Errorf("column %q differs after round trip of small pages", f.Name)
				}
				want.Release()
				if !array.Equal(r3.Column(i), got[1].Column(i)) {
					t.Errorf("column %q differs after round trip of large pages", f.Name)
				}
			}
		})
	}
}
