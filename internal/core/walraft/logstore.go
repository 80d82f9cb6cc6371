package walraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// boltStore is the replica's raft log and stable state in one bbolt file
// (<dir>/raft/raft.db): every StoreLogs, DeleteRange and Set is one bbolt
// transaction, fsynced before it returns (NoSync stays off), so a follower
// acknowledges and the leader counts itself only for entries on disk.
//
// Each entry is a bucket of its own (key: big-endian index) holding one
// value: bbolt keeps at least two and up to four values in a leaf and
// rewrites the whole leaf on every commit, so 64 KiB entries stored as
// plain values were rewritten about three times over; as buckets, the
// leaf holds only small bucket headers and an entry's bytes are written
// once, in pages of their own.
//
// It replaces hashicorp/raft-wal v0.4.0 (see doc.go); raft-boltdb/v2
// itself cannot be linked beside raft v1.8.0 (it imports go-metrics/compat, which
// go-metrics v0.7.0 no longer has), hence this small store of our own.
type boltStore struct {
	db *bbolt.DB
}

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
	// entryKey names the one value in an entry's bucket.
	entryKey = []byte("e")
	// errKeyNotFound is what raft expects from a StableStore for a key
	// never set: raft compares the error's text with "not found".
	errKeyNotFound = errors.New("not found")
)

var (
	_ raft.LogStore    = (*boltStore)(nil)
	_ raft.StableStore = (*boltStore)(nil)
)

// openBoltStore opens or creates the store at path. A file locked by
// another process fails after a second, naming the path.
func openBoltStore(path string) (*boltStore, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialise raft log %s: %w", path, err)
	}
	return &boltStore{db: db}, nil
}

// Close closes the file.
func (s *boltStore) Close() error { return s.db.Close() }

// FirstIndex is the lowest stored index, 0 when the log is empty.
func (s *boltStore) FirstIndex() (uint64, error) { return s.edge(true) }

// LastIndex is the highest stored index, 0 when the log is empty.
func (s *boltStore) LastIndex() (uint64, error) { return s.edge(false) }

func (s *boltStore) edge(first bool) (idx uint64, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		k, _ := c.Last()
		if first {
			k, _ = c.First()
		}
		if k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog reads entry index into out, or fails with raft.ErrLogNotFound.
func (s *boltStore) GetLog(index uint64, out *raft.Log) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		e := tx.Bucket(bucketLogs).Bucket(indexKey(index))
		if e == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(e.Get(entryKey), out); err != nil {
			return fmt.Errorf("raft log entry %d: %w", index, err)
		}
		out.Index = index
		return nil
	})
}

// StoreLog stores one entry durably.
func (s *boltStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one durable transaction.
func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			e, err := b.CreateBucketIfNotExists(indexKey(l.Index))
			if err == nil {
				err = e.Put(entryKey, encodeLog(l))
			}
			if err != nil {
				return fmt.Errorf("store raft log entry %d: %w", l.Index, err)
			}
		}
		return nil
	})
}

// DeleteRange removes entries min through max (inclusive) durably: a
// compacted head or a cleared suffix.
func (s *boltStore) DeleteRange(min, max uint64) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(indexKey(min)); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.DeleteBucket(k); err != nil {
				return fmt.Errorf("delete raft log entries %d-%d: %w", min, max, err)
			}
		}
		return nil
	})
}

// Set stores a stable value durably.
func (s *boltStore) Set(key, val []byte) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketStable).Put(key, val) })
}

// Get reads a stable value; a key never set fails with errKeyNotFound.
func (s *boltStore) Get(key []byte) (val []byte, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketStable).Get(key)
		if v == nil {
			return errKeyNotFound
		}
		val = append([]byte(nil), v...)
		return nil
	})
	return val, err
}

// SetUint64 stores a stable number durably.
func (s *boltStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a stable number; a key never set fails with errKeyNotFound.
func (s *boltStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable value %q has %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// encodeLog lays an entry out as term, type, appended-at (Unix ns), then
// data and extensions each preceded by its length (uvarint); the index is
// the key.
func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 17+2*binary.MaxVarintLen64+len(l.Data)+len(l.Extensions))
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	return append(b, l.Extensions...)
}

// errBadEntry marks a stored raft log entry that does not decode.
var errBadEntry = errors.New("malformed entry")

func decodeLog(v []byte, out *raft.Log) error {
	if len(v) < 17 {
		return errBadEntry
	}
	out.Term = binary.BigEndian.Uint64(v)
	out.Type = raft.LogType(v[8])
	out.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[9:])); at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	rest := v[17:]
	var err error
	if out.Data, rest, err = chunk(rest); err != nil {
		return err
	}
	if out.Extensions, rest, err = chunk(rest); err != nil {
		return err
	}
	if len(rest) != 0 {
		return errBadEntry
	}
	return nil
}

// chunk copies a uvarint-length-prefixed field out of bbolt's memory.
func chunk(v []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || n > uint64(len(v)-k) {
		return nil, nil, errBadEntry
	}
	if n > 0 {
		field = append([]byte(nil), v[k:k+int(n)]...)
	}
	return field, v[k+int(n):], nil
}
