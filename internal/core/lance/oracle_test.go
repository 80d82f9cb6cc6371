package lance

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

// TestOfficialReaderReadsEveryType has the official reader open a walctl
// table of every supported type with nulls, in both file formats: every
// value, null and row count at every version, a filter and a projection.
func TestOfficialReaderReadsEveryType(t *testing.T) {
	o := oracletest.MustFind(t)
	for _, fv := range []FileVersion{FileVersion2_0, FileVersion2_1} {
		t.Run(fv.String(), func(t *testing.T) { officialReadsEveryType(t, o, fv) })
	}
}

func officialReadsEveryType(t *testing.T, o *oracle.Oracle, fv FileVersion) {
	ctx := testCtx(t)
	s := allTypes()
	d := newDataset(t, s, fv)

	empty, err := o.Dump(ctx, d.Root(), oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if empty.CountRows != 0 || empty.Version != 1 {
		t.Fatalf("empty table: oracle saw %d rows at version %d", empty.CountRows, empty.Version)
	}

	var want map[string][]any
	rows := 0
	versionRows := map[uint64]int{}
	wantAt := map[uint64]map[string][]any{}
	// The last round's 1,200 rows fill several 2.1 mini-block chunks per
	// page and, with 64 KiB pages, several pages per wide column.
	for i, sizes := range [][]int{{10}, {1, 37}, {1200, 3}} {
		var recs []arrow.Record
		for _, n := range sizes {
			rec, w := batch(s, rows, n)
			defer rec.Release()
			// What the WAL's ingress validation accepts (nulls, empty and
			// multibyte strings, every type) is what the official reader
			// reads back identically below.
			if err := arrowcheck.Batch(s, rec); err != nil {
				t.Fatalf("arrowcheck refuses a valid batch: %v", err)
			}
			recs = append(recs, rec)
			want = mergeWant(want, w)
			rows += n
		}
		desc := writeFilePages(t, d, 64<<10*(i/2), recs...)
		res := appendFiles(t, d, map[string]string{"walctl.round": string(rune('a' + i))}, desc)
		versionRows[res.Version] = rows
		wantAt[res.Version] = mergeWant(nil, want)
	}
	for v, n := range versionRows {
		got, err := o.Dump(ctx, d.Root(), oracle.DumpOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		if got.CountRows != n || got.NumRows != n || got.Version != v {
			t.Fatalf("version %d: oracle saw %d/%d rows at version %d, want %d", v, got.CountRows, got.NumRows, got.Version, n)
		}
		sameColumns(t, got, wantAt[v])
	}
	got, err := o.Dump(ctx, d.Root(), oracle.DumpOptions{Filter: "id >= 10 AND id < 20 AND i32_n IS NOT NULL", Columns: []string{"id", "s_n"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.CountRows != 8 || len(got.Columns) != 2 { // rows 10..19 less 13 and 17 (null i32_n)
		t.Fatalf("filter: oracle saw %d rows and %d columns, want 8 and 2", got.CountRows, len(got.Columns))
	}
}
