package wal

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Log is the WAL as the rest of walctl sees it. The in-process *Engine and the
// Arrow Flight client (package walflight) both satisfy it, so commands and
// workers do not care which one they hold.
//
// Every method honours the deadline and cancellation of its context while it
// waits for the table, the network or the disk. Where a method mutates state,
// its documentation says what a cancelled or failed call may have done: an
// error that wraps errs.ErrUnavailable after the request was sent (a deadline,
// a lost connection, a failed fsync) is ambiguous — the mutation may or may not
// have happened, and the caller resolves it by reading the state back.
type Log interface {
	// CreateTable registers a table with a fixed schema and shard count.
	// Registering the identical schema and shard count again returns the
	// existing table; a different one fails with ErrTableConflict naming the
	// difference. Dictionary-encoded fields are refused (ErrSchemaMismatch).
	// Registration is durable before the call returns; an ambiguous outcome
	// is resolved by calling CreateTable again (it is idempotent).
	CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (TableInfo, error)
	// Table describes one table; an unknown table is ErrUnknownTable.
	Table(ctx context.Context, name string) (TableInfo, error)
	// Tables describes every table, ordered by name.
	Tables(ctx context.Context) ([]TableInfo, error)

	// Append appends one record batch to a shard as one entry and returns its
	// 1-based position once the entry is durable (fsynced). A record whose
	// schema differs from the table's fails with ErrSchemaMismatch naming the
	// field and writes nothing. Concurrent appends share syncs (group
	// commit). If the call fails after the entry was handed to the WAL (a
	// failed sync, a lost connection), the entry may or may not be durable:
	// it is then either wholly present at some position or absent, never
	// partly visible.
	Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error)
	// Seal seals the shard's open generation now, making it publishable, and
	// returns it. With no open entries it does nothing and returns a zero
	// Generation. Sealing is durable before the call returns; a failed call
	// may have sealed (Generations tells).
	Seal(ctx context.Context, table string, shard int) (Generation, error)
	// Generations lists the shard's generations that hold durable entries,
	// oldest first, trimmed ones excluded.
	Generations(ctx context.Context, table string, shard int) ([]Generation, error)
	// Read calls fn for each entry of the shard with from <= position <= to,
	// in order, streaming (a generation is never loaded whole). to == 0 means
	// the last durable position. Positions at or below the trimmed-through
	// position fail with ErrTrimmed; positions beyond the last durable one
	// with ErrBeyondEnd; a checksum failure with ErrCorruptEntry naming the
	// file and position. The Entry's record is released when fn returns
	// (Retain it to keep it). An error from fn stops the read and is returned.
	Read(ctx context.Context, table string, shard int, from, to uint64, fn func(Entry) error) error

	// Epoch returns the table's publisher epoch (0 for a new table).
	Epoch(ctx context.Context, table string) (uint64, error)
	// AdvanceEpoch moves the table's epoch from expect to expect+1 by
	// compare-and-swap and returns the new epoch once it is durable. If the
	// epoch is not expect, it fails with an *EpochConflictError
	// (ErrEpochConflict) carrying the current epoch. An ambiguous failure is
	// resolved with Epoch: never by advancing again blindly.
	AdvanceEpoch(ctx context.Context, table string, expect uint64) (uint64, error)
	// Trim drops the shard's sealed generations that lie wholly at or below
	// through, provided epoch is the table's current publisher epoch
	// (otherwise ErrStaleEpoch). It records the trimmed-through position
	// durably before deleting anything and returns it (unchanged if nothing
	// was dropped). A through beyond the last durable position is
	// ErrBadRange. A failed call may have trimmed; TrimmedThrough tells.
	Trim(ctx context.Context, table string, shard int, through, epoch uint64) (uint64, error)
	// Stats summarises every shard of a table. watermarks, keyed by shard,
	// are the published positions (absent means 0); pending figures count
	// sealed generations with entries above the watermark.
	Stats(ctx context.Context, table string, watermarks map[int]uint64) (TableStats, error)

	// Close releases the log. The engine finishes in-flight calls, syncs and
	// unlocks its directory; the client closes its connections.
	Close() error
}

// TableInfo describes a registered table.
type TableInfo struct {
	Name    string        `json:"name"`
	Schema  *arrow.Schema `json:"-"`
	Shards  int           `json:"shards"`
	Created time.Time     `json:"created"`
	Epoch   uint64        `json:"epoch"`
}

// Generation describes a contiguous run of entries of one shard. ID is the
// position of its first entry, which also names its files.
type Generation struct {
	ID       uint64    `json:"id"`
	First    uint64    `json:"first"`
	Last     uint64    `json:"last"`
	Entries  int       `json:"entries"`
	Bytes    int64     `json:"bytes"`
	Sealed   bool      `json:"sealed"`
	SealedAt time.Time `json:"sealed_at,omitzero"`
	// Path is the generation's Arrow IPC stream file on the WAL host.
	Path string `json:"path,omitempty"`
	// Damaged marks a range the shard cannot serve (see DamageReport):
	// reading it fails with ErrCorruptEntry. Entries then counts positions.
	Damaged bool `json:"damaged,omitempty"`
}

// Entry is one WAL entry handed to a Read callback.
type Entry struct {
	Position uint64
	Record   arrow.RecordBatch
	// Raw is the entry's Arrow IPC record batch message exactly as stored
	// (without the schema message). The engine sets it; the Flight client
	// leaves it nil. It is only valid until the callback returns.
	Raw []byte
}

// TableStats summarises a table's shards.
type TableStats struct {
	Table  string       `json:"table"`
	Epoch  uint64       `json:"epoch"`
	Shards []ShardStats `json:"shards"`
}

// ShardStats summarises one shard. Positions count durable entries only.
type ShardStats struct {
	Shard             int    `json:"shard"`
	OpenGenerations   int    `json:"open_generations"`
	SealedGenerations int    `json:"sealed_generations"`
	Entries           int64  `json:"entries"`
	Bytes             int64  `json:"bytes"`
	LastPosition      uint64 `json:"last_position"`
	TrimmedThrough    uint64 `json:"trimmed_through"`
	Watermark         uint64 `json:"watermark"`
	// PendingGenerations and PendingBytes count sealed generations holding
	// entries above Watermark.
	PendingGenerations int   `json:"pending_generations"`
	PendingBytes       int64 `json:"pending_bytes"`
	// OldestPendingAge is the age of the oldest pending sealed generation
	// (since it was sealed); zero when none is pending.
	OldestPendingAge time.Duration `json:"oldest_pending_age_ns"`
	// WatermarkBehindTrim is set when Watermark < TrimmedThrough: entries the
	// table has not published are gone (DESIGN.md §3 rule 9).
	WatermarkBehindTrim bool `json:"watermark_behind_trim,omitempty"`
	// Damage lists the shard's damaged or quarantined ranges (see
	// DamageReport); reads and trims reaching them fail with exit 6.
	Damage []DamageReport `json:"damage,omitempty"`
}
