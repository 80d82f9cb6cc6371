package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/durable"
)

const (
	tableFileName   = "table.json"
	epochFileName   = "epoch"
	trimmedFileName = "trimmed"
)

// tableFile is the content of <table>/table.json.
type tableFile struct {
	Version int       `json:"version"`
	Name    string    `json:"name"`
	Shards  int       `json:"shards"`
	Created time.Time `json:"created"`
	// SchemaIPC is the Arrow IPC schema message (EncodeSchema), the same
	// bytes that start every generation file.
	SchemaIPC []byte `json:"schema_ipc"`
	// Schema is informational, for people reading the file.
	Schema string `json:"schema"`
}

type table struct {
	name        string
	dir         string
	schema      *arrow.Schema
	schemaBytes []byte
	created     time.Time
	shards      []*shard

	epochMu sync.Mutex // serialises epoch CAS and trims against it
	epoch   uint64
	// epochErr is set when making an epoch durable failed in its fsync:
	// the epoch on disk is then unknown, and every CAS and trim fails with
	// it until the engine is reopened (recovery reads what is durable).
	epochErr error
}

func shardDirName(i int) string { return fmt.Sprintf("shard-%04d", i) }

func (t *table) info() TableInfo {
	t.epochMu.Lock()
	defer t.epochMu.Unlock()
	return TableInfo{Name: t.name, Schema: t.schema, Shards: len(t.shards), Created: t.created, Epoch: t.epoch}
}

// createTableDir builds a table directory under a temporary name and renames
// it into place, so a crash leaves either no table or a complete one. The
// directory and its shard directories are synced before the rename, the
// tables directory after it (durable.Rename).
func createTableDir(tablesDir, name string, schemaBytes []byte, schema *arrow.Schema, shards int, now time.Time) error {
	tmp := filepath.Join(tablesDir, ".tmp-"+name)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	tf := tableFile{Version: 1, Name: name, Shards: shards, Created: now.UTC(), SchemaIPC: schemaBytes, Schema: schema.String()}
	b, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteNew(filepath.Join(tmp, tableFileName), append(b, '\n')); err != nil {
		return err
	}
	if err := durable.WriteNew(filepath.Join(tmp, epochFileName), []byte("0\n")); err != nil {
		return err
	}
	for i := 0; i < shards; i++ {
		d := filepath.Join(tmp, shardDirName(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := durable.SyncDir(d); err != nil {
			return err
		}
	}
	if err := durable.SyncDir(tmp); err != nil {
		return err
	}
	return durable.Rename(tmp, filepath.Join(tablesDir, name))
}

// decodeTableFile parses a table registration record (table.json) of the
// table name; path names it in the error, which is a *corruptError.
func decodeTableFile(path, name string, b []byte) (tableFile, *arrow.Schema, error) {
	var tf tableFile
	if err := json.Unmarshal(b, &tf); err != nil || tf.Version != 1 || tf.Name != name {
		return tf, nil, corruptAt(path, 0, 0, "unreadable or not version 1 for table %q (%v)", name, err)
	}
	if err := validateShards(tf.Shards); err != nil {
		return tf, nil, corruptAt(path, 0, 0, "%v", err)
	}
	schema, err := DecodeSchema(tf.SchemaIPC)
	if err != nil {
		return tf, nil, corruptAt(path, 0, 0, "schema: %v", err)
	}
	return tf, schema, nil
}

// loadTable reads a table directory and recovers its shards. A damaged
// registration or epoch fails with a *corruptError; damage inside a shard
// is contained in it (loadShard).
func (e *Engine) loadTable(dir, name string) (*table, error) {
	p := filepath.Join(dir, tableFileName)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, corruptAt(p, 0, 0, "table registration missing")
	}
	if err != nil {
		return nil, unreadable(p, 0, 0, err)
	}
	tf, schema, err := decodeTableFile(p, name, b)
	if err != nil {
		return nil, err
	}
	t := &table{name: name, dir: dir, schema: schema, schemaBytes: tf.SchemaIPC, created: tf.Created}
	// The epoch is answered, and fences, only once durable: a process may
	// have died between renaming a new epoch into place and syncing the
	// directory (DESIGN.md §3 rule 22).
	if err := durable.SyncDir(dir); err != nil {
		return nil, err
	}
	if t.epoch, err = readUint(dir, epochFileName); err != nil {
		var ce *corruptError
		if !errors.As(err, &ce) {
			err = unreadable(filepath.Join(dir, epochFileName), 0, 0, err)
		}
		return nil, err
	}
	for i := 0; i < tf.Shards; i++ {
		t.shards = append(t.shards, e.loadShard(t, i))
	}
	return t, nil
}

func (t *table) closeShards() error {
	var first error
	for _, s := range t.shards {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// advanceEpoch is the CAS behind Engine.AdvanceEpoch. The new epoch is
// answered only once durable: when making it durable failed in an fsync
// (the new value may be on disk, or not), the epoch is unknown and every
// later CAS, trim and epoch read of the table fails until the engine is
// reopened — recovery syncs and reads what is durable. The file is never
// read back and believed.
func (t *table) advanceEpoch(expect uint64) (uint64, error) {
	t.epochMu.Lock()
	defer t.epochMu.Unlock()
	if t.epochErr != nil {
		return 0, t.epochErr
	}
	if t.epoch != expect {
		return 0, &EpochConflictError{Table: t.name, Expect: expect, Current: t.epoch}
	}
	if err := writeUint(t.dir, epochFileName, expect+1); err != nil {
		err = fmt.Errorf("table %q: advance epoch %d: %w: %w", t.name, expect, err, ErrIO)
		if errors.Is(err, durable.ErrSyncFailed) {
			t.epochErr = err
		}
		return 0, err
	}
	t.epoch = expect + 1
	return t.epoch, nil
}

// durableEpoch returns the table's epoch, or the error that made it
// unknown (advanceEpoch).
func (t *table) durableEpoch() (uint64, error) {
	t.epochMu.Lock()
	defer t.epochMu.Unlock()
	return t.epoch, t.epochErr
}
