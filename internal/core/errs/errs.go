// Package errs holds the error categories every part of walctl's core wraps
// its own sentinel errors in. The command layer maps these categories to
// documented exit codes in exactly one place (internal/commands/exitcode.go),
// so a package declares, for example,
//
//	var ErrStaleEpoch = fmt.Errorf("stale publisher epoch: %w", errs.ErrFenced)
//
// and callers test the specific error with errors.Is while the exit code
// follows from its category.
package errs

import "errors"

var (
	// ErrInvalid marks bad input: a malformed argument, an unknown JSON field,
	// a hostile name, a schema mismatch. Nothing was written. Exit code 2.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound marks a missing table, claim, version or key. Exit code 3.
	ErrNotFound = errors.New("not found")
	// ErrConflict marks a lost race or a failed compare-and-swap: another
	// holder, a newer version, an existing record. Exit code 4.
	ErrConflict = errors.New("conflict")
	// ErrFenced marks an operation refused because a newer publisher epoch
	// exists (the caller has been fenced out). Exit code 4.
	ErrFenced = errors.New("fenced")
	// ErrUnavailable marks a dependency that could not be reached in time
	// (etcd, the WAL server, the Kubernetes API). Exit code 5.
	ErrUnavailable = errors.New("dependency unavailable")
	// ErrCorrupt marks data that failed an integrity check: a checksum
	// mismatch, a torn or truncated file, an unparsable manifest. Nothing was
	// repaired or skipped. Exit code 6.
	ErrCorrupt = errors.New("data integrity error")
)
