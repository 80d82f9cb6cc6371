package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// ErrStorageFailed marks a table whose storage failed an fsync
// (durable.ErrSyncFailed): what the fsync covered may be lost, and a second
// fsync that succeeds proves nothing ("fsyncgate"), in this process or any
// other that reads the same page cache, so publishing of the table stops —
// no retry, no fence, no trim — for the whole fleet (DESIGN.md §3 rule 24):
// the publisher records the stop in etcd, where every claim, one-shot and
// catch-up respects it, until an operator repairs the storage and runs
// `walctl table resume`. It is a data-integrity error (exit 6).
var ErrStorageFailed = fmt.Errorf("storage failed: publishing of the table is stopped: %w", errs.ErrCorrupt)

// StorageError is the error of a table stopped by a failed fsync. It names
// the table and carries the failure (the directory or file, and the
// errno). errors.Is matches ErrStorageFailed, coord.ErrTableStopped,
// errs.ErrCorrupt, durable.ErrSyncFailed and the errno; not the categories
// of the operation that met the failure (a commit whose outcome is unknown
// is not retried).
type StorageError struct {
	Table string
	Err   error
	// recorded tells whether the fleet-wide stop record is in etcd; until
	// it is, the stop holds in this process and recording is retried.
	recorded atomic.Bool
}

// Recorded tells whether the fleet-wide stop record is in etcd.
func (e *StorageError) Recorded() bool { return e.recorded.Load() }

// Error names the table, the failed fsync (directory or file, errno) and
// what to do.
func (e *StorageError) Error() string {
	scope := "stopped for the whole fleet"
	if !e.Recorded() {
		scope = "stopped in this process (the fleet-wide stop record could not be written to etcd yet)"
	}
	return fmt.Sprintf("table %s: %v: %v, %s; repair the storage, then run `walctl table resume --table %s --reason ...`", e.Table, e.Err, ErrStorageFailed, scope, e.Table)
}

// Unwrap lists the sentinels the error matches.
func (e *StorageError) Unwrap() []error {
	out := []error{ErrStorageFailed, coord.ErrTableStopped, durable.ErrSyncFailed}
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		out = append(out, errno)
	}
	return out
}

// stopped records the tables a failed fsync stopped in this Publisher, and
// writes each stop to etcd for the fleet (record).
type stopped struct {
	record func(*StorageError) error
	mu     sync.Mutex
	tables map[string]*StorageError
}

// check returns the error that stopped table in this process, or nil. A
// stop not yet recorded in etcd is recorded now, if etcd answers.
func (s *stopped) check(table string) error {
	s.mu.Lock()
	e := s.tables[table]
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	s.push(e)
	return e
}

// note turns an error that wraps durable.ErrSyncFailed into the table's
// StorageError (the first one is kept), stops the table in this process
// and records the stop for the fleet; other errors pass unchanged.
func (s *stopped) note(table string, err error) error {
	if err == nil || !errors.Is(err, durable.ErrSyncFailed) {
		return err
	}
	var se *StorageError
	if errors.As(err, &se) {
		return err
	}
	s.mu.Lock()
	if s.tables == nil {
		s.tables = map[string]*StorageError{}
	}
	e := s.tables[table]
	if e == nil {
		e = &StorageError{Table: table, Err: err}
		s.tables[table] = e
	}
	s.mu.Unlock()
	s.push(e)
	return e
}

// push writes e's stop record unless it is written.
func (s *stopped) push(e *StorageError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Recorded() || s.record == nil {
		return
	}
	e.recorded.Store(s.record(e) == nil)
}

// recordStop writes the fleet-wide stop record of e's table (rule 24).
func (p *Publisher) recordStop(e *StorageError) error {
	info, err := p.coord.RecordStop(context.Background(), coord.StopRecord{Table: e.Table, Reason: e.Err.Error(), Owner: p.cfg.Owner})
	if err != nil {
		p.cfg.Logger.Error("storage failed; the fleet-wide stop could not be recorded yet, the table stays stopped in this process", "table", e.Table, "failure", e.Err, "err", err)
		return err
	}
	p.cfg.Logger.Error("storage failed; the table is stopped for the whole fleet", "table", e.Table, "failure", e.Err, "stopped_since", info.At, "stopped_by", info.Owner.String())
	return nil
}
