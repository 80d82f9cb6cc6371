package walraft

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

const (
	appliedFile = "applied"
	slotSize    = 16 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appliedRec is the FSM's durable progress. With Pending false, every
// command up to Index is applied. With Pending true, every command before
// Index is applied and command Index was about to be (or was) applied when
// the record was written; FP is the fingerprint of the state it touches,
// taken before applying, so a restart can tell exactly whether it landed.
//
// A run (Last > Index, see batch.go) is a batch of appends applied
// together: Run holds each shard's last position before it, so a restart
// can tell exactly how many of each shard's appends landed.
type appliedRec struct {
	Seq     uint64     `json:"seq"`
	Index   uint64     `json:"index"`
	Pending bool       `json:"pending,omitempty"`
	FP      string     `json:"fp,omitempty"`
	Last    uint64     `json:"last,omitempty"`
	Run     []runShard `json:"run,omitempty"`
}

// runShard is one shard of a run and its last position before the run.
type runShard struct {
	Table  string `json:"t"`
	Shard  int    `json:"s"`
	Before uint64 `json:"b"`
}

// certain is the highest index known to be applied.
func (r appliedRec) certain() uint64 {
	if r.Pending && r.Index > 0 {
		return r.Index - 1
	}
	return r.Index
}

// appliedStore keeps appliedRec in two fixed slots written alternately (each
// with its own CRC32C), so a torn write destroys at most the record being
// written, never the previous one.
type appliedStore struct {
	f   *os.File
	rec appliedRec
}

func openApplied(dir string) (*appliedStore, error) {
	p := filepath.Join(dir, appliedFile)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		if err := durable.WriteNew(p, make([]byte, 2*slotSize)); err != nil {
			return nil, fmt.Errorf("create %s: %w", p, err)
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 2*slotSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	s := &appliedStore{f: f}
	valid := 0
	for i := 0; i < 2; i++ {
		if r, ok := decodeSlot(buf[i*slotSize : (i+1)*slotSize]); ok {
			valid++
			if r.Seq >= s.rec.Seq {
				s.rec = r
			}
		}
	}
	if valid == 0 && !bytes.Equal(buf, make([]byte, len(buf))) {
		f.Close()
		return nil, fmt.Errorf("%s: both progress records are damaged: %w", p, errs.ErrCorrupt)
	}
	return s, nil
}

func decodeSlot(b []byte) (appliedRec, bool) {
	var r appliedRec
	n := binary.LittleEndian.Uint32(b[0:4])
	if n == 0 || n > slotSize-8 {
		return r, false
	}
	if crc32.Checksum(b[8:8+n], castagnoli) != binary.LittleEndian.Uint32(b[4:8]) {
		return r, false
	}
	return r, json.Unmarshal(b[8:8+n], &r) == nil
}

// write makes r durable before returning.
func (s *appliedStore) write(r appliedRec) error {
	r.Seq = s.rec.Seq + 1
	j, _ := json.Marshal(r)
	if len(j) > slotSize-8 {
		return fmt.Errorf("progress record of %d bytes exceeds its %d-byte slot", len(j), slotSize-8)
	}
	// Only the record's own bytes are written: the length prefix bounds
	// what is read back, whatever an older, longer record left behind.
	slot := make([]byte, 8+len(j))
	binary.LittleEndian.PutUint32(slot[0:4], uint32(len(j)))
	binary.LittleEndian.PutUint32(slot[4:8], crc32.Checksum(j, castagnoli))
	copy(slot[8:], j)
	if _, err := s.f.WriteAt(slot, int64(r.Seq%2)*slotSize); err != nil {
		return fmt.Errorf("write %s: %w", s.f.Name(), err)
	}
	// The file was written whole and synced when created (WriteNew): a
	// slot rewritten in place changes no size and no block, so fdatasync
	// makes it durable without a journal commit for the timestamps.
	if err := durable.DataSync(s.f); err != nil {
		return err
	}
	s.rec = r
	return nil
}

func (s *appliedStore) close() error { return s.f.Close() }
