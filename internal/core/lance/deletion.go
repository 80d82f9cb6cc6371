package lance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/objstore"
)

const deletionsDir = "_deletions"

// DeletedRows returns the offsets (0-based, ascending) of the rows of frag
// that its deletion file marks deleted, or none when it has no deletion
// file. The official writer records small deletions as an Arrow IPC file of
// uint32 offsets, which walctl reads; a roaring bitmap (large deletions) is
// ErrUnsupported.
func (d *Dataset) DeletedRows(frag Fragment) ([]uint32, error) {
	if !frag.HasDeletionFile {
		return nil, nil
	}
	del := frag.Deletion
	if del.Type != 0 {
		return nil, fmt.Errorf("fragment %d: deletion file type %d (roaring bitmap): %w", frag.ID, del.Type, ErrUnsupported)
	}
	key := fmt.Sprintf("%s/%d-%d-%d.arrow", deletionsDir, frag.ID, del.ReadVersion, del.ID)
	data, err := d.store.Get(context.Background(), key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, fmt.Errorf("%s: deletion file of fragment %d: %w", d.store.Join(key), frag.ID, ErrMissingFile)
		}
		return nil, err
	}
	rd, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", d.store.Join(key), err, ErrCorruptFile)
	}
	defer rd.Close()
	var out []uint32
	for i := 0; i < rd.NumRecords(); i++ {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", d.store.Join(key), err, ErrCorruptFile)
		}
		col, ok := rec.Column(0).(*array.Uint32)
		if rec.NumCols() != 1 || !ok {
			return nil, fmt.Errorf("%s: not one uint32 column: %w", d.store.Join(key), ErrCorruptFile)
		}
		out = append(out, col.Uint32Values()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if uint64(len(out)) != frag.DeletedRows {
		return nil, fmt.Errorf("%s: %d offsets, the manifest says %d deleted rows: %w", d.store.Join(key), len(out), frag.DeletedRows, ErrCorruptFile)
	}
	for _, o := range out {
		if uint64(o) >= frag.PhysicalRows {
			return nil, fmt.Errorf("%s: offset %d beyond the fragment's %d rows: %w", d.store.Join(key), o, frag.PhysicalRows, ErrCorruptFile)
		}
	}
	return out, nil
}

// dropRows returns rec without the rows at the sorted offsets del.
func dropRows(rec arrow.Record, del []uint32) (arrow.Record, error) {
	var parts []arrow.Record
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	start := int64(0)
	for _, o := range append(del, uint32(rec.NumRows())) {
		if int64(o) > start {
			parts = append(parts, rec.NewSlice(start, int64(o)))
		}
		start = int64(o) + 1
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, p := range parts {
		rows += p.NumRows()
	}
	for i := range cols {
		arrs := make([]arrow.Array, len(parts))
		for j, p := range parts {
			arrs[j] = p.Column(i)
		}
		if len(arrs) == 0 {
			arrs = []arrow.Array{array.NewSlice(rec.Column(i), 0, 0)}
			defer arrs[0].Release()
		}
		c, err := array.Concatenate(arrs, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecord(rec.Schema(), cols, rows), nil
}
