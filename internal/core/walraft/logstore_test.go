package walraft

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
	"go.etcd.io/bbolt"
)

// TestBoltStoreRoundTrip: entries survive a reopen field for field, a
// cleared suffix and a compacted head are gone after it, and the stable
// store reports keys never set the way raft expects ("not found").
func TestBoltStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(0, 1_700_000_000_123_456_789)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: i / 3, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, int(i)), Extensions: []byte{9}, AppendedAt: at})
	}
	logs[0].Data, logs[0].Extensions, logs[0].AppendedAt = nil, nil, time.Time{}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(8, 10); err != nil { // a cleared suffix
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 2); err != nil { // a compacted head
		t.Fatal(err)
	}
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a key never set: %v, want \"not found\"", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = openBoltStore(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 3 || last != 7 {
		t.Fatalf("after reopen the log holds %d..%d, want 3..7", first, last)
	}
	for _, i := range []uint64{1, 2, 8, 10} {
		var l raft.Log
		if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("deleted entry %d: %v, want raft.ErrLogNotFound", i, err)
		}
	}
	for i := uint64(3); i <= 7; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		w := logs[i-1]
		if l.Index != i || l.Term != w.Term || l.Type != w.Type || !bytes.Equal(l.Data, w.Data) || !bytes.Equal(l.Extensions, w.Extensions) || !l.AppendedAt.Equal(at) {
			t.Fatalf("entry %d read back as %+v, stored %+v", i, l, *w)
		}
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm after reopen: %d, %v", v, err)
	}
}

// TestBoltStoreMalformedEntry: a stored entry that does not decode is an
// error naming the index, never a zero entry.
func TestBoltStoreMalformedEntry(t *testing.T) {
	s, err := openBoltStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := encodeLog(&raft.Log{Index: 1, Term: 1, Data: []byte("abc")})
	if err := s.db.Update(func(tx *bbolt.Tx) error {
		e, err := tx.Bucket(bucketLogs).CreateBucket(indexKey(1))
		if err != nil {
			return err
		}
		return e.Put(entryKey, good[:len(good)-2])
	}); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, errBadEntry) {
		t.Fatalf("truncated entry: %v, want errBadEntry", err)
	}
}

// TestOpenRefusesRaftWALDirectory: a replica directory whose raft log was
// written by raft-wal (wal-meta.db in raft/) is refused with ErrOldRaftLog
// naming the directory, not opened with an empty raft log.
func TestOpenRefusesRaftWALDirectory(t *testing.T) {
	cfg, _ := baseConfig(t, "r0")
	cfg.Bootstrap = true
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	rd := filepath.Join(cfg.Dir, raftDir)
	if err := os.WriteFile(filepath.Join(rd, oldRaftMeta), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), cfg)
	if !errors.Is(err, ErrOldRaftLog) || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), rd) {
		t.Fatalf("open of a raft-wal directory: %v, want ErrOldRaftLog naming %s", err, rd)
	}
}
