package lance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
	"github.com/walctl/walctl/internal/core/lance/lancepb"
	"github.com/walctl/walctl/internal/core/objstore"
)

// ScanOptions select what Scan reads.
type ScanOptions struct {
	// Version to read; 0 means the latest.
	Version uint64
	// Columns to project, in this order; all columns if empty.
	Columns []string
	// Allocator for the returned records (memory.DefaultAllocator if nil).
	Allocator memory.Allocator
	// KeepDeleted returns the rows a deletion file marks deleted too, so
	// row i of a record is physical row i of its fragment (an audit reads
	// them with DeletedRows).
	KeepDeleted bool
}

// Scan reads the selected version fragment by fragment and calls fn with one
// record per fragment (fn must Retain it to keep it past the call). Pages
// walctl cannot decode fail with ErrUnsupported naming file and column; a
// missing or damaged data file fails with ErrMissingFile or ErrCorruptFile.
// Scan writes nothing and stops at the first error or cancellation.
func (d *Dataset) Scan(ctx context.Context, opts ScanOptions, fn func(arrow.Record) error) error {
	mem := opts.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	var m *Manifest
	var err error
	if opts.Version == 0 {
		m, err = d.Latest()
	} else {
		m, err = d.Manifest(opts.Version)
	}
	if err != nil {
		return err
	}
	schema, err := m.Schema()
	if err != nil {
		return err
	}
	idx, out, err := project(schema, opts.Columns)
	if err != nil {
		return err
	}
	for _, frag := range m.Fragments {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := d.readFragment(m, frag, schema, idx, out, mem)
		if err == nil && frag.HasDeletionFile && !opts.KeepDeleted {
			rec, err = d.withoutDeleted(rec, frag)
		}
		if err != nil {
			return err
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func project(s *Schema, cols []string) ([]int, *arrow.Schema, error) {
	if len(cols) == 0 {
		idx := make([]int, len(s.Fields))
		for i := range idx {
			idx[i] = i
		}
		return idx, s.Arrow, nil
	}
	var idx []int
	var fields []arrow.Field
	for _, c := range cols {
		is := s.Arrow.FieldIndices(c)
		if len(is) != 1 {
			return nil, nil, fmt.Errorf("column %q not in schema: %w", c, errs.ErrInvalid)
		}
		idx = append(idx, is[0])
		fields = append(fields, s.Arrow.Field(is[0]))
	}
	return idx, arrow.NewSchema(fields, nil), nil
}

func (d *Dataset) readFragment(m *Manifest, frag Fragment, s *Schema, idx []int, out *arrow.Schema, mem memory.Allocator) (arrow.Record, error) {
	files := map[string]*lancefile.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	cols := make([]arrow.Array, 0, len(idx))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, i := range idx {
		field := s.Fields[i]
		path, col, ok := locate(frag, field.ID)
		if !ok {
			return nil, fmt.Errorf("%s: fragment %d has no file for field %q (schema evolution is unsupported): %w", m.Path, frag.ID, field.Name, ErrUnsupported)
		}
		f := files[path]
		if f == nil {
			var err error
			if f, err = d.openDataFile(path); err != nil {
				return nil, err
			}
			files[path] = f
			if f.Rows != frag.PhysicalRows {
				return nil, fmt.Errorf("%s: %d rows, manifest %s says %d: %w", f.Path(), f.Rows, m.Path, frag.PhysicalRows, ErrCorruptFile)
			}
		}
		arr, err := f.ReadColumn(col, field.Name, out.Field(len(cols)).Type, mem)
		if err != nil {
			return nil, err
		}
		cols = append(cols, arr)
	}
	return array.NewRecord(out, cols, int64(frag.PhysicalRows)), nil
}

// locate finds the data file and column index holding a field.
func locate(frag Fragment, id int32) (string, int, bool) {
	for _, df := range frag.Files {
		for j, fid := range df.Fields {
			if fid != id {
				continue
			}
			if df.HasBaseID {
				return "", 0, false
			}
			col := j
			if j < len(df.ColumnIndices) {
				col = int(df.ColumnIndices[j])
			}
			return df.Path, col, true
		}
	}
	return "", 0, false
}

// openDataFile opens data/<name> of a fragment from the store.
func (d *Dataset) openDataFile(name string) (*lancefile.File, error) {
	key := dataDir + "/" + name
	r, err := d.store.Open(context.Background(), key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, fmt.Errorf("%s: data file missing: %w", d.store.Join(key), errs.ErrNotFound)
		}
		return nil, err
	}
	return lancefile.OpenReader(r, r.Size(), d.store.Join(key))
}

// withoutDeleted drops the rows frag's deletion file marks deleted (it
// releases rec).
func (d *Dataset) withoutDeleted(rec arrow.Record, frag Fragment) (arrow.Record, error) {
	defer rec.Release()
	del, err := d.DeletedRows(frag)
	if err != nil {
		return nil, err
	}
	return dropRows(rec, del)
}

// ReadFile reads the whole data file desc names (one of walctl's, whether
// or not a fragment of m still holds it) with m's schema: the record of
// every physical row, in order.
func (d *Dataset) ReadFile(m *Manifest, desc Descriptor) (arrow.Record, error) {
	schema, err := m.Schema()
	if err != nil {
		return nil, err
	}
	idx, out, err := project(schema, nil)
	if err != nil {
		return nil, err
	}
	cols := make([]int32, len(desc.FieldIDs))
	for i := range cols {
		cols[i] = int32(i)
	}
	frag := Fragment{PhysicalRows: desc.Rows, Files: []lancepb.DataFile{{Path: strings.TrimPrefix(desc.Path, dataDir+"/"),
		Fields: desc.FieldIDs, ColumnIndices: cols, Major: desc.FileMajor, Minor: desc.FileMinor}}}
	return d.readFragment(m, frag, schema, idx, out, memory.DefaultAllocator)
}

// ReadFragment reads every physical row of frag (deleted ones included)
// with m's schema.
func (d *Dataset) ReadFragment(m *Manifest, frag Fragment) (arrow.Record, error) {
	schema, err := m.Schema()
	if err != nil {
		return nil, err
	}
	idx, out, err := project(schema, nil)
	if err != nil {
		return nil, err
	}
	return d.readFragment(m, frag, schema, idx, out, memory.DefaultAllocator)
}
