package walraft

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// stableState is the content of <dir>/raft/stable: raft's stable keys
// (current term, last vote) and the raft log's first index after a
// compaction that ended inside a segment. It changes on elections and
// compactions only, and is replaced atomically (durable.WriteAtomic), its
// JSON preceded by its CRC32C.
type stableState struct {
	First uint64            `json:"first,omitempty"`
	KV    map[string][]byte `json:"kv,omitempty"`
}

func (st stableState) clone() stableState {
	st.KV = maps.Clone(st.KV)
	return st
}

func readStable(path string) (stableState, error) {
	var st stableState
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read raft stable state: %w", err)
	}
	if len(b) < 4 || crc32.Checksum(b[4:], castagnoli) != binary.LittleEndian.Uint32(b) {
		return st, fmt.Errorf("raft stable state %s fails its checksum: %w", path, errs.ErrCorrupt)
	}
	if err := json.Unmarshal(b[4:], &st); err != nil {
		return st, fmt.Errorf("raft stable state %s: %v: %w", path, err, errs.ErrCorrupt)
	}
	return st, nil
}

// writeStable replaces the stable file with st, durably (wmu held).
func (s *segStore) writeStable(st stableState) error {
	j, _ := json.Marshal(st)
	b := binary.LittleEndian.AppendUint32(nil, crc32.Checksum(j, castagnoli))
	if err := durable.WriteAtomic(filepath.Join(s.dir, stableFile), append(b, j...)); err != nil {
		return err
	}
	s.mu.Lock()
	s.stable = st
	s.mu.Unlock()
	return nil
}

// Set stores a stable value durably.
func (s *segStore) Set(key, val []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	st := s.stable.clone()
	if st.KV == nil {
		st.KV = map[string][]byte{}
	}
	st.KV[string(key)] = append([]byte(nil), val...)
	return s.writeStable(st)
}

// Get reads a stable value; a key never set fails with errKeyNotFound.
func (s *segStore) Get(key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.stable.KV[string(key)]
	if !ok {
		return nil, errKeyNotFound
	}
	return append([]byte(nil), v...), nil
}

// SetUint64 stores a stable number durably.
func (s *segStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a stable number; a key never set fails with errKeyNotFound.
func (s *segStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable value %q has %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
