package verify

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
)

// IDs checks that every id of [first, last] in the int64 column named
// column appears exactly once in the version r reads, and returns the
// version's row count. Ids outside the range are counted, not checked. A
// missing or duplicated id wraps errs.ErrCorrupt naming it; a column that
// is not int64 is errs.ErrInvalid. It reads only the one column.
func IDs(ctx context.Context, r *publish.Reader, column string, first, last int64) (rows int64, err error) {
	if last < first {
		return 0, fmt.Errorf("id range %d…%d is empty: %w", first, last, errs.ErrInvalid)
	}
	seen := make([]uint8, last-first+1)
	err = r.Scan(ctx, []string{column}, func(b arrow.RecordBatch) error {
		ids, ok := b.Column(0).(*array.Int64)
		if !ok {
			return fmt.Errorf("column %s is %s, not int64: %w", column, b.Column(0).DataType(), errs.ErrInvalid)
		}
		rows += int64(ids.Len())
		for i := 0; i < ids.Len(); i++ {
			if id := ids.Value(i); id >= first && id <= last && seen[id-first] < 2 {
				seen[id-first]++
			}
		}
		return nil
	})
	if err != nil {
		return rows, err
	}
	for i, n := range seen {
		if n != 1 {
			return rows, fmt.Errorf("%s version %d: id %d appears %d times, want exactly once: %w", r.Manifest.Path, r.Manifest.Version, first+int64(i), n, errs.ErrCorrupt)
		}
	}
	return rows, nil
}
