package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// Defaults for Options.
const (
	DefaultMaxGenerationBytes = 8 << 20
	DefaultMaxGenerationAge   = 10 * time.Second
	DefaultMaxEntryBytes      = 256 << 20
	// DefaultRecycledGenerations is how many trimmed generations' files
	// each shard keeps to write the next generations over (recycle_gen.go).
	DefaultRecycledGenerations = 2
)

// Options configure an Engine. The zero value gives the defaults.
type Options struct {
	// MaxGenerationBytes seals the open generation before an append would
	// take it past this size (a larger single entry gets a generation of
	// its own). Default 8 MiB.
	MaxGenerationBytes int64
	// MaxGenerationAge seals an open generation this long after its first
	// entry, so a quiet shard still becomes publishable. Default 10 s;
	// negative disables age sealing.
	MaxGenerationAge time.Duration
	// MaxEntryBytes bounds one encoded entry. Default 256 MiB.
	MaxEntryBytes int64
	// QuickOpen skips checksumming the entries of sealed generations at
	// open (their index structure is still checked; reads always verify).
	// The open generation is always checked entry by entry.
	QuickOpen bool
	// RecycledGenerations is how many trimmed generations' files each
	// shard keeps for reuse. Default DefaultRecycledGenerations; negative
	// keeps none.
	RecycledGenerations int
	// Clock drives age sealing; default the real clock.
	Clock clock.Clock
	// Logger receives recovery and sealing events; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxGenerationBytes <= 0 {
		o.MaxGenerationBytes = DefaultMaxGenerationBytes
	}
	if o.MaxGenerationAge == 0 {
		o.MaxGenerationAge = DefaultMaxGenerationAge
	}
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Engine is the in-process WAL on a local directory. It satisfies Log. Only
// one Engine (in any process) may hold a directory at a time.
type Engine struct {
	dir  string
	opts Options
	lock *dirlock.Lock

	life   sync.RWMutex // shared by calls, exclusive by Close
	closed bool

	mu     sync.Mutex // guards tables and badTables
	tables map[string]*table
	// badTables reports tables whose registration or epoch is damaged:
	// every call naming one fails with its report (exit 6).
	badTables []DamageReport
	// unsynced holds the tables whose directory could not be made durable
	// at open (a failed fsync): every call naming one fails with it, as an
	// I/O failure, until the WAL is reopened.
	unsynced map[string]error

	wake       chan struct{}
	stop       chan struct{}
	sealerDone chan struct{}
	removers   sync.WaitGroup // deletions of trimmed generations in flight
}

var _ Log = (*Engine)(nil)

// Open locks dir (creating it, and syncing the parents that got a new
// entry), recovers every table and starts age sealing. A directory held by
// another engine fails with dirlock.ErrLocked naming the holder's pid.
// Recovery truncates a torn tail of each shard's open generation. Damage is
// contained (DESIGN.md §3 rule 18): a table or shard that fails an integrity
// check is listed by Damage and refuses, with ErrCorruptEntry naming file
// and byte, the operations that need the damaged positions; the others work.
// Open itself fails only when the directory cannot be read or written.
func Open(dir string, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create WAL directory: %w", err)
	}
	lock, err := dirlock.Acquire(dir)
	if err != nil {
		return nil, err
	}
	e := &Engine{dir: dir, opts: opts, lock: lock, tables: map[string]*table{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), sealerDone: make(chan struct{})}
	if err := e.recover(); err != nil {
		for _, t := range e.tables {
			t.closeShards()
		}
		lock.Release()
		return nil, err
	}
	go e.sealer()
	return e, nil
}

func (e *Engine) tablesDir() string { return filepath.Join(e.dir, "tables") }

func (e *Engine) recover() error {
	td := e.tablesDir()
	if err := durable.MkdirAll(td, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(td)
	if err != nil {
		return err
	}
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".tmp-") {
			// An unfinished registration or counter update.
			if err := os.RemoveAll(filepath.Join(td, name)); err != nil {
				return err
			}
			continue
		}
		var t *table
		var err error = corruptAt(filepath.Join(td, name), 0, 0, "unexpected entry in the WAL's table directory")
		if de.IsDir() && ValidateName(name) == nil {
			t, err = e.loadTable(filepath.Join(td, name), name)
		}
		if errors.Is(err, durable.ErrSyncFailed) {
			e.opts.Logger.Error("wal: a table's directory cannot be made durable: every call on the table fails until the WAL is reopened",
				"table", name, "err", err)
			if e.unsynced == nil {
				e.unsynced = map[string]error{}
			}
			e.unsynced[name] = err
			continue
		}
		var ce *corruptError
		if errors.As(err, &ce) {
			rep := DamageReport{Table: name, Shard: -1, First: 1, File: ce.File, Offset: ce.Offset, Detail: ce.Detail}
			e.opts.Logger.Error("wal: damaged table registration: every call on the table fails until it is repaired by hand",
				"table", name, "file", ce.File, "detail", ce.Detail)
			e.badTables = append(e.badTables, rep)
			continue
		}
		if err != nil {
			return err
		}
		e.tables[name] = t
	}
	// Registrations renamed into place, and the tables directory itself,
	// are durable before any is served (a process may have died before
	// its directory sync).
	if err := durable.SyncDir(td); err != nil {
		return err
	}
	return durable.SyncDir(e.dir)
}

// Dir is the engine's directory.
func (e *Engine) Dir() string { return e.dir }

// enter admits a call; the caller must call e.life.RUnlock when done.
func (e *Engine) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return ctxErr(err)
	}
	e.life.RLock()
	if e.closed {
		e.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (e *Engine) table(name string) (*table, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.tables[name]; t != nil {
		return t, nil
	}
	for _, d := range e.badTables {
		if d.Table == name {
			return nil, fmt.Errorf("table %q: registration damaged: %s: byte %d: %s: %w", name, d.File, d.Offset, d.Detail, ErrCorruptEntry)
		}
	}
	if err := e.unsynced[name]; err != nil {
		return nil, fmt.Errorf("table %q: its registration and epoch could not be made durable at open (reopen the WAL once the disk works): %v: %w", name, err, ErrIO)
	}
	return nil, fmt.Errorf("table %q: %w", name, ErrUnknownTable)
}

func (e *Engine) shard(name string, i int) (*table, *shard, error) {
	t, err := e.table(name)
	if err != nil {
		return nil, nil, err
	}
	if err := checkShard(name, i, len(t.shards)); err != nil {
		return nil, nil, err
	}
	return t, t.shards[i], nil
}

// CreateTable implements Log.
func (e *Engine) CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (TableInfo, error) {
	if err := ValidateName(name); err != nil {
		return TableInfo{}, err
	}
	if err := validateShards(shards); err != nil {
		return TableInfo{}, err
	}
	if err := checkSchemaSupported(schema); err != nil {
		return TableInfo{}, fmt.Errorf("table %q: %w", name, err)
	}
	if err := e.enter(ctx); err != nil {
		return TableInfo{}, err
	}
	defer e.life.RUnlock()
	if _, err := e.table(name); errors.Is(err, ErrCorruptEntry) || errors.Is(err, ErrIO) {
		return TableInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.tables[name]; t != nil {
		if d := schemaDiff(t.schema, schema); d != "" {
			return TableInfo{}, fmt.Errorf("table %q exists with a different schema: %s: %w", name, d, ErrTableConflict)
		}
		if len(t.shards) != shards {
			return TableInfo{}, fmt.Errorf("table %q exists with %d shards, not %d: %w", name, len(t.shards), shards, ErrTableConflict)
		}
		return t.info(), nil
	}
	for other := range e.tables {
		if strings.EqualFold(other, name) {
			return TableInfo{}, fmt.Errorf("table %q: table %q exists, and names that differ only in case are one directory on case-insensitive file systems (macOS): %w", name, other, ErrTableConflict)
		}
	}
	sb, err := EncodeSchema(schema)
	if err != nil {
		return TableInfo{}, fmt.Errorf("table %q: %v: %w", name, err, ErrSchemaMismatch)
	}
	if err := createTableDir(e.tablesDir(), name, sb, schema, shards, e.opts.Clock.Now()); err != nil {
		return TableInfo{}, fmt.Errorf("create table %q: %v: %w", name, err, ErrIO)
	}
	t, err := e.loadTable(filepath.Join(e.tablesDir(), name), name)
	if err != nil {
		return TableInfo{}, fmt.Errorf("create table %q: %w: %w", name, err, ErrIO)
	}
	e.tables[name] = t
	return t.info(), nil
}

// Table implements Log.
func (e *Engine) Table(ctx context.Context, name string) (TableInfo, error) {
	if err := e.enter(ctx); err != nil {
		return TableInfo{}, err
	}
	defer e.life.RUnlock()
	t, err := e.table(name)
	if err != nil {
		return TableInfo{}, err
	}
	return t.info(), nil
}

// Tables implements Log.
func (e *Engine) Tables(ctx context.Context) ([]TableInfo, error) {
	if err := e.enter(ctx); err != nil {
		return nil, err
	}
	defer e.life.RUnlock()
	e.mu.Lock()
	ts := make([]*table, 0, len(e.tables))
	for _, t := range e.tables {
		ts = append(ts, t)
	}
	e.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	out := make([]TableInfo, len(ts))
	for i, t := range ts {
		out[i] = t.info()
	}
	return out, nil
}

// Epoch implements Log. It fails while the table's epoch is unknown (a
// failed fsync of its last advance; see AdvanceEpoch).
func (e *Engine) Epoch(ctx context.Context, name string) (uint64, error) {
	if err := e.enter(ctx); err != nil {
		return 0, err
	}
	defer e.life.RUnlock()
	t, err := e.table(name)
	if err != nil {
		return 0, err
	}
	return t.durableEpoch()
}

// AdvanceEpoch implements Log. The new epoch is fsynced (temp file, rename,
// directory sync) before it is returned; cancellation is only checked before
// the swap starts.
func (e *Engine) AdvanceEpoch(ctx context.Context, name string, expect uint64) (uint64, error) {
	if err := e.enter(ctx); err != nil {
		return 0, err
	}
	defer e.life.RUnlock()
	t, err := e.table(name)
	if err != nil {
		return 0, err
	}
	return t.advanceEpoch(expect)
}

// Close waits for in-flight calls (a Read callback must therefore not wait
// for Close), stops age sealing, syncs and closes every
// open generation (it stays open on disk and is resumed by the next Open) and
// releases the directory lock. Later calls fail with ErrClosed.
func (e *Engine) Close() error {
	e.life.Lock()
	if e.closed {
		e.life.Unlock()
		return nil
	}
	e.closed = true
	e.life.Unlock()
	close(e.stop)
	<-e.sealerDone
	e.removers.Wait()
	var first error
	for _, t := range e.tables {
		if err := t.closeShards(); err != nil && first == nil {
			first = err
		}
	}
	if err := e.lock.Release(); err != nil && first == nil {
		first = err
	}
	return first
}

// ctxErr wraps a context error so it is both errors.Is(ctx.Err()) and in the
// ErrUnavailable category (a deadline is a dependency not answering in time).
func ctxErr(err error) error {
	return fmt.Errorf("%w: %w", err, errs.ErrUnavailable)
}
