package walraft

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
)

// op is the kind of a replicated command.
type op uint8

const (
	opCreate op = iota + 1
	opAppend
	opSeal
	opAdvance
	opTrim
	// opAppendEntry is an append whose payload is the entry as the engine
	// stores it (wal.Engine.Encode on the leader): every replica stores
	// those bytes as they are, checked in place, without decoding and
	// encoding the record again. opAppend (an Arrow IPC stream of the
	// record) is what earlier versions logged; it is still applied.
	opAppendEntry
)

// isAppend tells whether o appends a record (either payload format).
func (o op) isAppend() bool { return o == opAppend || o == opAppendEntry }

// String names the command kind in errors and logs.
func (o op) String() string {
	switch o {
	case opCreate:
		return "create-table"
	case opAppend:
		return "append"
	case opSeal:
		return "seal"
	case opAdvance:
		return "advance-epoch"
	case opTrim:
		return "trim"
	case opAppendEntry:
		return "append-entry"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// command is one entry of the raft log. Time is the leader's clock at
// proposal: every replica applies with it, so creation and seal times are
// identical everywhere.
type command struct {
	Op      op     `json:"op"`
	Time    int64  `json:"t"`
	Table   string `json:"table"`
	Shard   int    `json:"shard,omitempty"`
	Shards  int    `json:"shards,omitempty"`
	Expect  uint64 `json:"expect,omitempty"`
	Through uint64 `json:"through,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
	// Payload is the Arrow IPC stream of the schema (create) or of the
	// record (append); it follows the JSON header in the encoding.
	Payload []byte `json:"-"`
}

const commandVersion = 1

// encode lays a command out as: version byte, uvarint header length, JSON
// header, payload.
func (c *command) encode() []byte {
	h, _ := json.Marshal(c)
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(h)+len(c.Payload))
	out = append(out, commandVersion)
	out = binary.AppendUvarint(out, uint64(len(h)))
	out = append(out, h...)
	return append(out, c.Payload...)
}

func decodeCommand(b []byte) (command, error) {
	var c command
	if len(b) < 2 || b[0] != commandVersion {
		return c, fmt.Errorf("raft log entry is not a walraft command (version byte %v): %w", b[:min(len(b), 1)], errs.ErrCorrupt)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || uint64(len(b)-1-k) < n {
		return c, fmt.Errorf("raft log entry header is truncated: %w", errs.ErrCorrupt)
	}
	h := b[1+k : 1+k+int(n)]
	if err := json.Unmarshal(h, &c); err != nil {
		return c, fmt.Errorf("raft log entry header: %v: %w", err, errs.ErrCorrupt)
	}
	c.Payload = b[1+k+int(n):]
	return c, nil
}

func (c *command) time() time.Time { return time.Unix(0, c.Time).UTC() }

// encodeSchema writes schema as an Arrow IPC stream with no batches.
func encodeSchema(schema *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeSchema reads an encodeSchema stream. Its bytes came from a peer:
// they are read with the bounded, checked reader of outside bytes.
func decodeSchema(b []byte) (*arrow.Schema, error) {
	r, err := arrowcheck.NewStreamReader(b)
	if err != nil {
		return nil, fmt.Errorf("decode schema: %v: %w", err, errs.ErrCorrupt)
	}
	defer r.Release()
	return r.Schema(), nil
}

// encodeRecord writes rec as an Arrow IPC stream (schema, batch, end).
func encodeRecord(rec arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("encode record: %v: %w", err, errs.ErrInvalid)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeRecord reads the single batch of an encodeRecord stream (a peer's
// bytes: read with the bounded, checked reader of outside bytes; the batch
// points into b); the caller releases it.
func decodeRecord(b []byte) (arrow.RecordBatch, error) {
	r, err := arrowcheck.NewStreamReader(b)
	if err != nil {
		return nil, fmt.Errorf("decode record: %v: %w", err, errs.ErrCorrupt)
	}
	defer r.Release()
	if !r.Next() {
		return nil, fmt.Errorf("decode record: no batch (%v): %w", r.Err(), errs.ErrCorrupt)
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}
