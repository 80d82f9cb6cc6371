package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"k8s.io/utils/clock"
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
	// recorded is closed once the fleet-wide stop record is in etcd;
	// until then the stop holds in this process, recording is retried, and
	// Session.Release keeps the claim, so no other process takes the table.
	recorded chan struct{}
}

// Recorded tells whether the fleet-wide stop record is in etcd.
func (e *StorageError) Recorded() bool {
	select {
	case <-e.recorded:
		return true
	default:
		return false
	}
}

// waitRecorded waits until the stop is recorded or ctx ends.
func (e *StorageError) waitRecorded(ctx context.Context) error {
	select {
	case <-e.recorded:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Error names the table, the failed fsync (directory or file, errno) and
// what to do.
func (e *StorageError) Error() string {
	scope := "stopped for the whole fleet"
	if !e.Recorded() {
		scope = "stopped in this process (the fleet-wide stop record could not be written to etcd yet; this process keeps trying and keeps the claim)"
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
// writes each stop to etcd for the fleet (record), retrying until it is
// written.
type stopped struct {
	record func(*StorageError) error
	clock  clock.Clock // waits between retries of record
	mu     sync.Mutex
	tables map[string]*StorageError
}

// check returns the error that stopped table in this process, or nil.
func (s *stopped) check(table string) error {
	if e := s.get(table); e != nil {
		return e
	}
	return nil
}

func (s *stopped) get(table string) *StorageError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tables[table]
}

// note turns an error that wraps durable.ErrSyncFailed into the table's
// StorageError (the first one is kept), stops the table in this process
// and records the stop for the fleet: at once, and if etcd does not take
// it, again in the background until it does. Other errors pass unchanged.
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
	if e != nil {
		s.mu.Unlock()
		return e
	}
	e = &StorageError{Table: table, Err: err, recorded: make(chan struct{})}
	s.tables[table] = e
	s.mu.Unlock()
	if s.record == nil || s.record(e) == nil {
		close(e.recorded)
	} else {
		go s.recordUntilDone(e)
	}
	return e
}

// recordUntilDone retries writing e's stop record, from one second apart
// up to thirty, until etcd takes it.
func (s *stopped) recordUntilDone(e *StorageError) {
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		s.clock.Sleep(wait)
		if s.record(e) == nil {
			close(e.recorded)
			return
		}
	}
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
