package walflight

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Action types served by DoAction. Bodies and results are JSON; unknown
// fields in a body are refused.
const (
	ActionCreateTable  = "create-table"  // createTableReq → tableWire
	ActionTable        = "table"         // tableReq → tableWire
	ActionTables       = "tables"        // {} → []tableWire
	ActionSeal         = "seal"          // shardReq → wal.Generation
	ActionGenerations  = "generations"   // shardReq → []wal.Generation
	ActionEpoch        = "epoch"         // tableReq → epochResp
	ActionAdvanceEpoch = "advance-epoch" // advanceReq → epochResp
	ActionTrim         = "trim"          // trimReq → trimResp
	ActionStats        = "stats"         // statsReq → wal.TableStats
)

type tableReq struct {
	Name string `json:"name"`
}

type createTableReq struct {
	Name   string `json:"name"`
	Shards int    `json:"shards"`
	// Schema is the Arrow IPC schema message (wal.EncodeSchema).
	Schema []byte `json:"schema"`
}

type tableWire struct {
	Name    string    `json:"name"`
	Shards  int       `json:"shards"`
	Created time.Time `json:"created"`
	Epoch   uint64    `json:"epoch"`
	Schema  []byte    `json:"schema"`
}

type shardReq struct {
	Table string `json:"table"`
	Shard int    `json:"shard"`
}

type advanceReq struct {
	Table  string `json:"table"`
	Expect uint64 `json:"expect"`
}

type epochResp struct {
	Epoch uint64 `json:"epoch"`
}

type trimReq struct {
	Table   string `json:"table"`
	Shard   int    `json:"shard"`
	Through uint64 `json:"through"`
	Epoch   uint64 `json:"epoch"`
}

type trimResp struct {
	TrimmedThrough uint64 `json:"trimmed_through"`
}

type statsReq struct {
	Table      string         `json:"table"`
	Watermarks map[int]uint64 `json:"watermarks,omitempty"`
}

// readTicket is the DoGet ticket: entries from..to (to 0 = last) of a shard.
type readTicket struct {
	Table string `json:"table"`
	Shard int    `json:"shard"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// posMeta is the app metadata of a DoPut result and of each DoGet record.
type posMeta struct {
	Position uint64 `json:"position"`
}

// decodeStrict decodes exactly one JSON value, refusing unknown fields.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("request body: %v: %w", err, errs.ErrInvalid)
	}
	if d.More() {
		return fmt.Errorf("request body: trailing data after the JSON value: %w", errs.ErrInvalid)
	}
	return nil
}

func toWire(t wal.TableInfo) (tableWire, error) {
	sb, err := wal.EncodeSchema(t.Schema)
	if err != nil {
		return tableWire{}, err
	}
	return tableWire{Name: t.Name, Shards: t.Shards, Created: t.Created, Epoch: t.Epoch, Schema: sb}, nil
}

func fromWire(w tableWire) (wal.TableInfo, error) {
	s, err := wal.DecodeSchema(w.Schema)
	if err != nil {
		return wal.TableInfo{}, err
	}
	return wal.TableInfo{Name: w.Name, Schema: s, Shards: w.Shards, Created: w.Created, Epoch: w.Epoch}, nil
}

// putDescriptor names the table and shard a DoPut stream appends to.
func putDescriptor(table string, shard int) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table, strconv.Itoa(shard)}}
}

func parsePutDescriptor(d *flight.FlightDescriptor) (string, int, error) {
	if d == nil || d.Type != flight.DescriptorPATH || len(d.Path) != 2 {
		return "", 0, fmt.Errorf("DoPut needs a path descriptor [table, shard]: %w", errs.ErrInvalid)
	}
	shard, err := strconv.Atoi(d.Path[1])
	if err != nil {
		return "", 0, fmt.Errorf("DoPut descriptor shard %q: %w", d.Path[1], wal.ErrBadShard)
	}
	return d.Path[0], shard, nil
}
