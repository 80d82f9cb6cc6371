package walraft

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// snapHeader is the first frame of a snapshot: the state at Applied, minus
// the entries, which follow shard by shard (trimmed+1 … last), one frame
// each, in the order of Tables and their shards.
type snapHeader struct {
	Version int         `json:"version"`
	Applied uint64      `json:"applied"`
	Tables  []snapTable `json:"tables"`
}

type snapTable struct {
	Name    string      `json:"name"`
	Schema  []byte      `json:"schema"`
	Shards  int         `json:"shards"`
	Created int64       `json:"created"`
	Epoch   uint64      `json:"epoch"`
	Shard   []snapShard `json:"shard"`
}

type snapShard struct {
	Trimmed uint64           `json:"trimmed"`
	Last    uint64           `json:"last"`
	Gens    []wal.Generation `json:"gens"`
}

// snapshot is a point-in-time description of the engine; Persist streams
// the entries from the live engine (sealed generations are immutable; a
// trim racing the stream fails it, and raft retries later).
type snapshot struct {
	f   *fsm
	hdr snapHeader
}

// Snapshot implements raft.FSM. It runs between applies, so the header is
// the state at the last applied command. It first records that index as
// applied outright, so a restart never mistakes the snapshot for a newer
// state than the FSM's.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	idx := f.index.Load()
	if r := f.applied.rec; r.Pending || r.Index != idx {
		if err := f.applied.write(appliedRec{Index: idx}); err != nil {
			return nil, err
		}
	}
	hdr, err := describe(context.Background(), f.eng)
	if err != nil {
		return nil, err
	}
	hdr.Applied = idx
	return &snapshot{f: f, hdr: hdr}, nil
}

func describe(ctx context.Context, eng *wal.Engine) (snapHeader, error) {
	hdr := snapHeader{Version: 1}
	infos, err := eng.Tables(ctx)
	if err != nil {
		return hdr, err
	}
	for _, info := range infos {
		sb, err := encodeSchema(info.Schema)
		if err != nil {
			return hdr, err
		}
		st, err := eng.Stats(ctx, info.Name, nil)
		if err != nil {
			return hdr, err
		}
		t := snapTable{Name: info.Name, Schema: sb, Shards: info.Shards, Created: info.Created.UnixNano(), Epoch: st.Epoch}
		for _, ss := range st.Shards {
			gens, err := eng.Generations(ctx, info.Name, ss.Shard)
			if err != nil {
				return hdr, err
			}
			for i := range gens {
				gens[i].Path = ""
			}
			t.Shard = append(t.Shard, snapShard{Trimmed: ss.TrimmedThrough, Last: ss.LastPosition, Gens: gens})
		}
		hdr.Tables = append(hdr.Tables, t)
	}
	return hdr, nil
}

// Persist implements raft.FSMSnapshot: header, then every untrimmed entry,
// streamed (one entry in memory at a time).
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	err := s.persist(sink)
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) persist(sink io.Writer) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	h, _ := json.Marshal(s.hdr)
	if err := writeFrame(w, h); err != nil {
		return err
	}
	eng, release, err := s.f.engine()
	if err != nil {
		return err
	}
	defer release()
	ctx := context.Background()
	for _, t := range s.hdr.Tables {
		for i, sh := range t.Shard {
			if sh.Last <= sh.Trimmed {
				continue
			}
			err := eng.Read(ctx, t.Name, i, sh.Trimmed+1, sh.Last, func(e wal.Entry) error {
				b, err := encodeRecord(e.Record)
				if err != nil {
					return err
				}
				return writeFrame(w, b)
			})
			if err != nil {
				return fmt.Errorf("snapshot %s shard %d: %w", t.Name, i, err)
			}
		}
	}
	return w.Flush()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

func writeFrame(w io.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(n[:], uint64(len(b)))
	if _, err := w.Write(n[:k]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

const maxFrame = 1 << 30

func readFrame(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("snapshot frame: %w", noEOF(err))
	}
	if n > maxFrame {
		return nil, fmt.Errorf("snapshot frame of %d bytes exceeds %d: %w", n, maxFrame, errs.ErrCorrupt)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("snapshot frame: %w", noEOF(err))
	}
	return b, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return fmt.Errorf("truncated snapshot: %w", errs.ErrCorrupt)
	}
	return err
}

func readHeader(r *bufio.Reader) (snapHeader, error) {
	var hdr snapHeader
	b, err := readFrame(r)
	if err != nil {
		return hdr, err
	}
	if err := json.Unmarshal(b, &hdr); err != nil || hdr.Version != 1 {
		return hdr, fmt.Errorf("snapshot header (version %d): %v: %w", hdr.Version, err, errs.ErrCorrupt)
	}
	return hdr, nil
}
