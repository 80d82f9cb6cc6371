package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/wal"
)

// Selection picks the version a managed reader opens (rule 13).
type Selection struct {
	// Version, when non-zero, is an exact version.
	Version uint64
	// Published selects the latest version that walctl published data in
	// (skipping fences and foreign commits after it).
	Published bool
}

// Reader reads one version of a table without a claim or an epoch.
type Reader struct {
	ds       *lance.Dataset
	Manifest *lance.Manifest
	State    State
}

// NotPublishedError is returned by OpenReader for a table with no Lance
// dataset yet: nothing was ever published into it. It unwraps to
// lance.ErrDatasetNotFound (and so errs.ErrNotFound).
type NotPublishedError struct {
	Table string
	Err   error
}

func (e *NotPublishedError) Error() string {
	return "table " + e.Table + " has no published version yet"
}

// Unwrap returns the dataset error.
func (e *NotPublishedError) Unwrap() error { return e.Err }

// OpenReader opens table under the local directory lanceRoot read-only at
// the selected version (OpenReaderOn for any store).
func OpenReader(lanceRoot, table string, sel Selection) (*Reader, error) {
	if objstore.HasScheme(lanceRoot) {
		return nil, fmt.Errorf("%s: %w", lanceRoot, lance.ErrNotLocal)
	}
	return OpenReaderOn(objstore.NewLocal(lanceRoot), table, sel)
}

// OpenReaderOn opens table under the lance root store read-only at the
// selected version.
func OpenReaderOn(root objstore.Store, table string, sel Selection) (*Reader, error) {
	if err := wal.ValidateName(table); err != nil {
		return nil, err
	}
	ds, err := lance.OpenStore(root.Sub(table + ".lance"))
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return nil, &NotPublishedError{Table: table, Err: err}
	}
	if err != nil {
		return nil, err
	}
	var m *lance.Manifest
	switch {
	case sel.Version != 0:
		m, err = ds.Manifest(sel.Version)
	case sel.Published:
		m, err = latestPublished(ds)
	default:
		m, err = ds.Latest()
	}
	if err != nil {
		return nil, err
	}
	st, err := ParseState(m.Config)
	if err != nil {
		return nil, err
	}
	return &Reader{ds: ds, Manifest: m, State: st}, nil
}

func latestPublished(ds *lance.Dataset) (*lance.Manifest, error) {
	latest, err := ds.LatestVersion()
	if err != nil {
		return nil, err
	}
	for v := latest; v >= 1; v-- {
		m, err := ds.Manifest(v)
		if errors.Is(err, lance.ErrVersionNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		plan := m.Config[KeyPlan]
		if plan == "" {
			continue
		}
		prev := ""
		if v > 1 {
			if pm, err := ds.Manifest(v - 1); err == nil {
				prev = pm.Config[KeyPlan]
			}
		}
		if plan != prev {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%s: no version published by walctl: %w", ds.Root(), errs.ErrNotFound)
}

// Dataset is the dataset the reader reads.
func (r *Reader) Dataset() *lance.Dataset { return r.ds }

// Scan calls fn for the record batches of the version, projected to columns
// (all when empty). The batch is released when fn returns.
func (r *Reader) Scan(ctx context.Context, columns []string, fn func(arrow.RecordBatch) error) error {
	return r.ds.Scan(ctx, lance.ScanOptions{Version: r.Manifest.Version, Columns: columns}, fn)
}

// ScanPhysical is Scan without dropping deleted rows: row i of the k-th
// batch is physical row i of the version's k-th fragment.
func (r *Reader) ScanPhysical(ctx context.Context, fn func(arrow.RecordBatch) error) error {
	return r.ds.Scan(ctx, lance.ScanOptions{Version: r.Manifest.Version, KeepDeleted: true}, fn)
}

// LatestWatermarks returns the published watermarks of the latest version of
// table under lanceRoot (a managed read: no claim, no epoch). A table with
// no dataset yet has published nothing: empty watermarks, no error.
func LatestWatermarks(lanceRoot, table string) (Watermarks, error) {
	if objstore.HasScheme(lanceRoot) {
		return nil, fmt.Errorf("%s: %w", lanceRoot, lance.ErrNotLocal)
	}
	return LatestWatermarksOn(objstore.NewLocal(lanceRoot), table)
}

// LatestWatermarksOn is LatestWatermarks under the lance root store.
func LatestWatermarksOn(root objstore.Store, table string) (Watermarks, error) {
	r, err := OpenReaderOn(root, table, Selection{})
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return Watermarks{}, nil
	}
	if err != nil {
		return nil, err
	}
	return r.State.Watermarks, nil
}
