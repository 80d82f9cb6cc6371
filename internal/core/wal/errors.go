package wal

import (
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
)

// Sentinel errors. Each wraps one of the categories of package errs, so the
// command layer derives an exit code from it while callers test the specific
// condition with errors.Is. The Flight client reconstructs the same sentinels
// from a server's answer, so errors.Is works across the wire too.
var (
	// ErrBadName marks a table name that is empty, too long or contains
	// characters outside [A-Za-z0-9_-] (see ValidateName).
	ErrBadName = fmt.Errorf("invalid table name: %w", errs.ErrInvalid)
	// ErrBadShard marks a shard number outside [0, shards).
	ErrBadShard = fmt.Errorf("invalid shard: %w", errs.ErrInvalid)
	// ErrBadRange marks a read or trim range that makes no sense (from 0,
	// from beyond to, a trim beyond the last position).
	ErrBadRange = fmt.Errorf("invalid position range: %w", errs.ErrInvalid)
	// ErrSchemaMismatch marks a record batch (or a repeated registration)
	// whose schema differs from the table's; the message names the field.
	ErrSchemaMismatch = fmt.Errorf("schema mismatch: %w", errs.ErrInvalid)
	// ErrUnknownTable marks a table that is not registered.
	ErrUnknownTable = fmt.Errorf("unknown table: %w", errs.ErrNotFound)
	// ErrTrimmed marks a read of positions that have been trimmed away.
	ErrTrimmed = fmt.Errorf("positions trimmed: %w", errs.ErrNotFound)
	// ErrBeyondEnd marks a read of positions that have not been appended.
	ErrBeyondEnd = fmt.Errorf("positions not yet appended: %w", errs.ErrNotFound)
	// ErrTableConflict marks a registration of an existing table with a
	// different schema or shard count; the message names the difference.
	ErrTableConflict = fmt.Errorf("table registered differently: %w", errs.ErrConflict)
	// ErrEpochConflict marks a failed epoch compare-and-swap. The concrete
	// error is an *EpochConflictError carrying the current epoch.
	ErrEpochConflict = fmt.Errorf("publisher epoch changed: %w", errs.ErrConflict)
	// ErrStaleEpoch marks a trim presented with an epoch that is not the
	// table's current publisher epoch.
	ErrStaleEpoch = fmt.Errorf("stale publisher epoch: %w", errs.ErrFenced)
	// ErrCorruptEntry marks an entry or generation file that failed an
	// integrity check; the message names the file and the position.
	ErrCorruptEntry = fmt.Errorf("corrupt WAL data: %w", errs.ErrCorrupt)
	// ErrClosed marks a call on a closed engine or client.
	ErrClosed = fmt.Errorf("WAL closed: %w", errs.ErrUnavailable)
	// ErrIO marks a failed write or sync. The shard refuses further appends
	// until the engine is reopened (recovery decides what is durable).
	ErrIO = fmt.Errorf("WAL write failed: %w", errs.ErrUnavailable)
)

// EpochConflictError is returned by AdvanceEpoch when the table's epoch is not
// the expected one. errors.Is(err, ErrEpochConflict) holds for it.
type EpochConflictError struct {
	Table   string
	Expect  uint64
	Current uint64
}

// Error names the table, the expected and the current epoch.
func (e *EpochConflictError) Error() string {
	return fmt.Sprintf("table %q: advance epoch from %d refused, current epoch is %d: %v",
		e.Table, e.Expect, e.Current, ErrEpochConflict)
}

// Unwrap returns ErrEpochConflict.
func (e *EpochConflictError) Unwrap() error { return ErrEpochConflict }
