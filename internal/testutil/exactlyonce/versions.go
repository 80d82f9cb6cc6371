package exactlyonce

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/synth"
)

// Version is what one Lance version of a table held.
type Version struct {
	Number     uint64
	IDs        []int64
	Watermarks map[int]uint64
	Epoch      uint64
	Plan       string
}

// ReadVersions reads every version of table under lanceRoot, oldest first,
// with walctl's managed reader (publish.OpenReader at each version's
// number). A table not published yet has none. A version listed but gone
// by the time it is opened (removed by a racing `table clean`) is skipped.
func ReadVersions(ctx context.Context, lanceRoot, table string) ([]Version, error) {
	ds, err := lance.Open(filepath.Join(lanceRoot, table+".lance"))
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	infos, err := ds.Versions()
	if err != nil {
		return nil, err
	}
	var out []Version
	for _, vi := range infos {
		v, err := readVersion(ctx, lanceRoot, table, vi.Version)
		if errors.Is(err, lance.ErrVersionNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("version %d of %s: %w", vi.Version, table, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func readVersion(ctx context.Context, lanceRoot, table string, n uint64) (Version, error) {
	r, err := publish.OpenReader(lanceRoot, table, publish.Selection{Version: n})
	if err != nil {
		return Version{}, err
	}
	v := Version{Number: n, Watermarks: map[int]uint64(r.State.Watermarks), Epoch: r.State.Epoch, Plan: r.State.Plan}
	err = r.Scan(ctx, []string{synth.IDField}, func(b arrow.RecordBatch) error {
		ids, ok := b.Column(0).(*array.Int64)
		if !ok {
			return fmt.Errorf("column %q is %s, want int64", synth.IDField, b.Column(0).DataType())
		}
		v.IDs = append(v.IDs, ids.Int64Values()...)
		return nil
	})
	return v, err
}
