package s3accept

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// walctlRow is one row of `walctl table read --output json` on the
// quickstart table.
type walctlRow struct {
	ID        int64     `json:"id"`
	TS        time.Time `json:"ts"`
	Body      *string   `json:"body"`
	Embedding []float32 `json:"embedding"`
}

// sameRowsAsWalctl compares every row and column the official reader reads
// from the bucket with what walctl's own reader reads.
func sameRowsAsWalctl(ctx context.Context, t *testing.T, s *site, o *oracle.Oracle, dataDir, root, table string) {
	t.Helper()
	r := s.run("read", nil, "--data-dir", dataDir, "--lance-root", root, "--output", "json", "table", "read", "--table", "quickstart")
	var mine struct {
		Rows []walctlRow `json:"rows"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &mine) != nil {
		t.Fatalf("walctl table read: %s", r)
	}
	byID := make(map[int64]walctlRow, len(mine.Rows))
	for _, row := range mine.Rows {
		byID[row.ID] = row
	}
	d, err := o.Dump(ctx, table, oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.NumRows != len(mine.Rows) || len(d.Columns) != 4 {
		t.Fatalf("official reader: %d rows, columns %v; walctl: %d rows", d.NumRows, d.Schema, len(mine.Rows))
	}
	for i, raw := range d.Columns["id"] {
		id, err := oracle.ParseInt64(raw)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := byID[id]
		if !ok {
			t.Fatalf("id %d: read by the official reader, not by walctl", id)
		}
		var ts string
		var body *string
		var emb []float32
		if json.Unmarshal(d.Columns["ts"][i], &ts) != nil || json.Unmarshal(d.Columns["body"][i], &body) != nil ||
			json.Unmarshal(d.Columns["embedding"][i], &emb) != nil {
			t.Fatalf("id %d: undecodable row %s %s %s", id, d.Columns["ts"][i], d.Columns["body"][i], d.Columns["embedding"][i])
		}
		if ts != strconv.FormatInt(w.TS.UnixMicro(), 10) || (body == nil) != (w.Body == nil) || (body != nil && *body != *w.Body) || len(emb) != len(w.Embedding) {
			t.Fatalf("id %d: official ts %s body %v emb %d; walctl %v %v %d", id, ts, body, len(emb), w.TS, w.Body, len(w.Embedding))
		}
		for k := range emb {
			if emb[k] != w.Embedding[k] {
				t.Fatalf("id %d: embedding[%d] official %v, walctl %v", id, k, emb[k], w.Embedding[k])
			}
		}
	}
}
