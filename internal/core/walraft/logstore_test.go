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
)

// TestSegStoreRoundTrip: entries survive a reopen field for field, a
// cleared suffix and a compacted head are gone after it, and the stable
// store reports keys never set the way raft expects ("not found").
func TestSegStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := openSegStore(dir)
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
	if s, err = openSegStore(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantRange(t, s, 3, 7)
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

func wantRange(t *testing.T, s *segStore, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("the log holds %d..%d, want %d..%d", f, l, first, last)
	}
}

// storeRange stores entries from..to, one batch of size bytes each, and
// returns their data by index.
func storeRange(t *testing.T, s *segStore, from, to uint64, size int) map[uint64][]byte {
	t.Helper()
	data := map[uint64][]byte{}
	for i := from; i <= to; i++ {
		data[i] = bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2)
		if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data[i]}}); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := segNames(filepath.Join(dir, logDir))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestSegStoreSegments: a log spanning several segments compacts by
// removing whole segment files, clears a suffix that starts in an older
// segment, and reads every surviving entry back after a reopen.
func TestSegStoreSegments(t *testing.T) {
	dir := t.TempDir()
	s, err := openSegStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4 << 20 // 16 entries per 64 MiB segment
	data := storeRange(t, s, 1, 40, size)
	if n := len(segFiles(t, dir)); n != 3 {
		t.Fatalf("40 entries of 4 MiB in %d segments, want 3", n)
	}
	if err := s.DeleteRange(1, 20); err != nil { // compaction
		t.Fatal(err)
	}
	if got := segFiles(t, dir); len(got) != 2 || got[0] != segName(17) {
		t.Fatalf("after compaction through 20 the segments are %v, want two from 17", got)
	}
	if err := s.DeleteRange(30, 40); err != nil { // a cleared suffix
		t.Fatal(err)
	}
	if got := segFiles(t, dir); len(got) != 1 {
		t.Fatalf("after clearing 30..40 the segments are %v, want one", got)
	}
	for i, d := range storeRange(t, s, 30, 33, size) { // a new leader's entries
		data[i] = d
	}
	s.Close()
	if s, err = openSegStore(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantRange(t, s, 21, 33)
	for i := uint64(21); i <= 33; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, data[i]) {
			t.Fatalf("entry %d after reopen: %v (%d bytes, want %d)", i, err, len(l.Data), len(data[i]))
		}
	}
}

// TestSegStoreTornTail: a batch whose write was cut short (as by a power
// loss before its fdatasync returned) is cut off on open; the entries
// before it stay, and the next batch continues the log.
func TestSegStoreTornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := openSegStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := storeRange(t, s, 1, 5, 1000)
	s.Close()
	p := filepath.Join(dir, logDir, segName(1))
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, fi.Size()-10); err != nil { // entry 5 torn
		t.Fatal(err)
	}
	if s, err = openSegStore(dir); err != nil {
		t.Fatal(err)
	}
	wantRange(t, s, 1, 4)
	if fi2, _ := os.Stat(p); fi2.Size() >= fi.Size()-10 {
		t.Fatalf("torn tail not cut: segment is %d bytes", fi2.Size())
	}
	data[5] = storeRange(t, s, 5, 6, 1000)[5]
	s.Close()
	if s, err = openSegStore(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantRange(t, s, 1, 6)
	var l raft.Log
	if err := s.GetLog(5, &l); err != nil || !bytes.Equal(l.Data, data[5]) {
		t.Fatalf("entry 5 rewritten after the cut: %v", err)
	}
}

// TestSegStoreDamage: a damaged entry in an older segment is not a torn
// tail: open fails with ErrCorrupt naming the file; one read at run time
// fails with errBadEntry, never a zero entry.
func TestSegStoreDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := openSegStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 1, 20, 4<<20)
	p := filepath.Join(dir, logDir, segName(1))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XXXX"), 5<<20); err != nil { // inside entry 2
		t.Fatal(err)
	}
	f.Close()
	var l raft.Log
	if err := s.GetLog(2, &l); !errors.Is(err, errBadEntry) {
		t.Fatalf("damaged entry: %v, want errBadEntry", err)
	}
	s.Close()
	if _, err = openSegStore(dir); !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), p) {
		t.Fatalf("open with a damaged older segment: %v, want ErrCorrupt naming %s", err, p)
	}
}

// TestSegStoreGap: a batch beyond the next index (a follower that installed
// a snapshot past its log) replaces the log.
func TestSegStoreGap(t *testing.T) {
	dir := t.TempDir()
	s, err := openSegStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 1, 5, 100)
	storeRange(t, s, 100, 101, 100)
	wantRange(t, s, 100, 101)
	s.Close()
	if s, err = openSegStore(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantRange(t, s, 100, 101)
	if got := segFiles(t, dir); len(got) != 1 || got[0] != segName(100) {
		t.Fatalf("segments after a gap: %v", got)
	}
}

// TestOpenRefusesRaftWALDirectory: a replica directory whose raft log was
// written by raft-wal (wal-meta.db in raft/) or bbolt (raft.db) is refused with ErrOldRaftLog
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
	for _, old := range oldRaftLogs {
		p := filepath.Join(rd, old)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Open(context.Background(), cfg)
		if !errors.Is(err, ErrOldRaftLog) || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), rd) || !strings.Contains(err.Error(), old) {
			t.Fatalf("open of a directory with %s: %v, want ErrOldRaftLog naming %s", old, err, rd)
		}
		os.Remove(p)
	}
}
