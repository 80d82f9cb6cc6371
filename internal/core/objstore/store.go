// Package objstore is walctl's storage layer for Lance tables: one small
// interface over a local directory (every durable step through
// internal/core/durable, as before) and an S3-compatible bucket. Keys are
// slash-separated and relative to the store's root; a store never reads or
// writes outside it.
package objstore

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
)

var (
	// ErrNotFound is a key that does not exist.
	ErrNotFound = fmt.Errorf("object not found: %w", errs.ErrNotFound)
	// ErrExists is a conditional create refused because the key exists: the
	// caller lost a race (a Lance commit conflict).
	ErrExists = fmt.Errorf("object already exists: %w", errs.ErrConflict)
	// ErrUnknownOutcome is a write whose request may or may not have taken
	// effect (a timeout or a 5xx after it was sent, a failed fsync after a
	// link). Resolve it by reading, never by writing again.
	ErrUnknownOutcome = fmt.Errorf("write outcome unknown: %w", errs.ErrUnavailable)
	// ErrUnsafeStore is a store that does not honour a conditional request
	// walctl relies on: create-if-absent (If-None-Match: * on PUT), else two
	// writers could both win one Lance version, or compare-and-delete
	// (If-Match on DELETE), else a stale retirement could remove a record
	// pinned anew. The error wrapping it names the condition (Probe).
	ErrUnsafeStore = fmt.Errorf("store does not honour the conditional requests walctl relies on: %w", errs.ErrUnavailable)
	// ErrUnsupportedRoot is a --lance-root walctl cannot use (an unknown URL
	// scheme, a key prefix with ".."); it is bad input.
	ErrUnsupportedRoot = fmt.Errorf("unsupported lance root: %w", errs.ErrInvalid)
)

// Info describes one object.
type Info struct {
	// Key is relative to the store (or, from List, to the listed prefix's
	// store root: the full key).
	Key  string
	Size int64
	// Modified is the object's last modification time.
	Modified time.Time
	// ETag is the object store's entity tag ("" on a local store, and
	// in listings): a replaced object gets another one.
	ETag string
	// CRC32C is the whole-object CRC-32C (Castagnoli) that the store
	// itself computed from the bytes it received, checked against the one
	// the writer sent, and keeps with the object (S3: a FULL_OBJECT
	// x-amz-checksum-crc32c, returned by HeadObject with ChecksumMode
	// ENABLED). Valid only if HasCRC32C: a local store, or an object
	// written without that checksum, vouches for none.
	CRC32C    uint32
	HasCRC32C bool
}

// Reader reads one object at random offsets.
type Reader interface {
	io.ReaderAt
	io.Closer
	// Size is the object's size when it was opened.
	Size() int64
}

// Writer streams one new object. Nothing is visible under its key before
// Commit returns nil; Abort discards what was written.
type Writer interface {
	io.Writer
	// Commit makes the object durable and visible under its key.
	Commit() error
	// Abort discards the object; it is a no-op after Commit.
	Abort() error
	// BufferBytes is the memory the writer holds for unsent bytes (its
	// bounded part buffers), for the caller's memory budget.
	BufferBytes() int
	// CRC32C is the CRC-32C (Castagnoli) of every byte written so far:
	// the writer computes it once, as the bytes pass, for the caller's
	// descriptor and (on S3) for the store to check.
	CRC32C() uint32
	// Committed describes the object once Commit returned nil: its size
	// and, on an object store, the ETag and the CRC-32C the store checked
	// and keeps (what Stat returns for it while it is unchanged).
	Committed() Info
}

// Hooks are named points of PutIfAbsent where a test or a failpoint may
// inject a fault or a pause; a nil hook costs nothing.
type Hooks struct {
	// BeforePublish runs once the data is staged (a local temp file is
	// fsynced) and before the object can become visible; its error aborts
	// with nothing created and is returned as is.
	BeforePublish func(ctx context.Context) error
	// AfterPublish runs once the object is visible but before it is known
	// durable (local: linked, directory not yet synced; S3: the PUT
	// answered). Its error is returned wrapping ErrUnknownOutcome.
	AfterPublish func(ctx context.Context) error
}

// Store is one root of keys: a local directory or an S3 bucket prefix.
// Every method is safe for concurrent use.
type Store interface {
	// String names the store in messages: a directory or s3://bucket/prefix.
	String() string
	// Join names key inside the store in messages.
	Join(key string) string
	// Sub returns the store rooted at prefix (a relative key prefix).
	Sub(prefix string) Store
	// Get reads a whole object; a missing key is ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Open opens an object for random reads; a missing key is ErrNotFound.
	Open(ctx context.Context, key string) (Reader, error)
	// Stat describes an object, with the ETag and CRC-32C an object store
	// keeps for it; a missing key is ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns the objects directly under dir (not deeper), keys
	// relative to the store, sorted. A dir with no object is an empty list.
	List(ctx context.Context, dir string) ([]Info, error)
	// ListTree returns the objects under dir at any depth, sorted.
	ListTree(ctx context.Context, dir string) ([]Info, error)
	// PutIfAbsent creates key with data only if it does not exist:
	// ErrExists when it did (a lost race), ErrUnknownOutcome when the
	// request may have landed. A returned nil means created and durable.
	// h may be nil.
	PutIfAbsent(ctx context.Context, key string, data []byte, h *Hooks) error
	// Put writes key durably, replacing any object there. Use it only for
	// keys unique to the writer (attempt-unique names).
	Put(ctx context.Context, key string, data []byte) error
	// Create streams a new object under key (a key unique to the writer).
	Create(ctx context.Context, key string) (Writer, error)
	// Delete removes key durably; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// MakeDirs creates directories durably on a filesystem (no-op on an
	// object store, which has none).
	MakeDirs(ctx context.Context, dirs ...string) error
	// SyncDirs makes the names under each existing dir durable on a
	// filesystem (no-op on an object store, where a completed PUT is
	// durable). An error wraps durable.ErrSyncFailed.
	SyncDirs(ctx context.Context, dirs ...string) error
	// Local returns the store's directory, or "" for an object store.
	Local() string
}
