package cmdutil

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// TableNames returns [table] when one is given, else every table the WAL
// knows, in name order, with the WAL they were read from.
func (f *Factory) TableNames(ctx context.Context, table string) (wal.Log, []string, error) {
	log, err := f.WAL(ctx)
	if err != nil {
		return nil, nil, err
	}
	if table != "" {
		return log, []string{table}, nil
	}
	cctx, cancel := f.CallContext(ctx)
	defer cancel()
	infos, err := log.Tables(cctx)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(infos))
	for _, i := range infos {
		names = append(names, i.Name)
	}
	return log, names, nil
}

// TableInfo returns the WAL and one table's registration.
func (f *Factory) TableInfo(ctx context.Context, table string) (wal.Log, wal.TableInfo, error) {
	log, err := f.WAL(ctx)
	if err != nil {
		return nil, wal.TableInfo{}, err
	}
	cctx, cancel := f.CallContext(ctx)
	defer cancel()
	info, err := log.Table(cctx, table)
	return log, info, err
}

// ReadInput reads a file argument; "-" is standard input. A file that
// cannot be read is invalid input naming the path.
func (f *Factory) ReadInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(f.IOStreams.In)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %v: %w", path, err, errs.ErrInvalid)
	}
	return b, nil
}
