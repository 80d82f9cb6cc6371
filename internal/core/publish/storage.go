package publish

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// ErrStorageFailed marks a table whose storage failed an fsync in this
// process (durable.ErrSyncFailed): what the fsync covered may be lost, and
// a second fsync that succeeds proves nothing ("fsyncgate"), so the
// publisher stops publishing that table — no retry, no trim — until the
// process restarts and re-reads what is on disk. It is a data-integrity
// error (exit 6).
var ErrStorageFailed = fmt.Errorf("storage failed: publishing of the table is stopped in this process: %w", errs.ErrCorrupt)

// StorageError is the error of a table stopped by a failed fsync. It names
// the table and carries the failure (the directory or file, and the
// errno). errors.Is matches ErrStorageFailed, errs.ErrCorrupt,
// durable.ErrSyncFailed and the errno; not the categories of the operation
// that met the failure (a commit whose outcome is unknown is not retried).
type StorageError struct {
	Table string
	Err   error
}

// Error names the table, the failed fsync (directory or file, errno) and
// what to do.
func (e *StorageError) Error() string {
	return fmt.Sprintf("table %s: %v: %v; restart walctl once the storage is repaired (a fresh process re-reads what is on disk)", e.Table, e.Err, ErrStorageFailed)
}

// Unwrap lists the sentinels the error matches.
func (e *StorageError) Unwrap() []error {
	out := []error{ErrStorageFailed, durable.ErrSyncFailed}
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		out = append(out, errno)
	}
	return out
}

// stopped records the tables a failed fsync stopped in this Publisher.
type stopped struct {
	mu     sync.Mutex
	tables map[string]*StorageError
}

// check returns the error that stopped table, or nil.
func (s *stopped) check(table string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.tables[table]; e != nil {
		return e
	}
	return nil
}

// note turns an error that wraps durable.ErrSyncFailed into the table's
// StorageError (the first one is kept) and stops the table; other errors
// pass unchanged.
func (s *stopped) note(table string, err error) error {
	if err == nil || !errors.Is(err, durable.ErrSyncFailed) {
		return err
	}
	var se *StorageError
	if errors.As(err, &se) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables == nil {
		s.tables = map[string]*StorageError{}
	}
	if e := s.tables[table]; e != nil {
		return e
	}
	e := &StorageError{Table: table, Err: err}
	s.tables[table] = e
	return e
}
