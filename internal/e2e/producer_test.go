package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/synth"
)

// producer appends synthetic batches to a table through the WAL server's
// Flight API and logs every ACKed record: its unique id and its values.
type producer struct {
	c     *cluster
	table string
	gen   *synth.Generator
	acked map[int64]row
}

// row is one ACKed record's values other than the id.
type row struct {
	body *string
	vec  []float32 // nil when null
}

func (c *cluster) producer(table string, seed uint64) *producer {
	c.t.Helper()
	info, err := c.wal.Table(c.ctx, table)
	if err != nil {
		c.t.Fatal(err)
	}
	gen, err := synth.New(info.Schema, seed)
	if err != nil {
		c.t.Fatal(err)
	}
	gen.NextID = int64(seed) * 1_000_000
	return &producer{c: c, table: table, gen: gen, acked: map[int64]row{}}
}

// append appends batches of rows records to shard; each is logged once ACKed.
func (p *producer) append(shard, batches, rows int) {
	p.c.t.Helper()
	for i := 0; i < batches; i++ {
		b := p.gen.Batch(rows)
		_, err := p.c.wal.Append(p.c.ctx, p.table, shard, b)
		if err != nil {
			b.Release()
			p.c.t.Fatalf("append to %s shard %d: %v", p.table, shard, err)
		}
		s := b.Schema()
		ids := b.Column(s.FieldIndices("id")[0]).(*array.Int64)
		body := b.Column(s.FieldIndices("body")[0]).(*array.String)
		vec := b.Column(s.FieldIndices("vec")[0]).(*array.FixedSizeList)
		vals := vec.ListValues().(*array.Float32)
		for j := 0; j < ids.Len(); j++ {
			var r row
			if body.IsValid(j) {
				v := body.Value(j)
				r.body = &v
			}
			if vec.IsValid(j) {
				start, end := vec.ValueOffsets(j)
				r.vec = slices.Clone(vals.Float32Values()[start:end])
			}
			if _, dup := p.acked[ids.Value(j)]; dup {
				p.c.t.Fatalf("producer made id %d twice", ids.Value(j))
			}
			p.acked[ids.Value(j)] = r
		}
		b.Release()
	}
}

// seal seals shard's open generation.
func (p *producer) seal(shard int) {
	p.c.t.Helper()
	if _, err := p.c.wal.Seal(p.c.ctx, p.table, shard); err != nil {
		p.c.t.Fatalf("seal %s shard %d: %v", p.table, shard, err)
	}
}

// generation appends batches of rows to both shards and seals them: one
// sealed generation per shard.
func (p *producer) generation(batches, rows int) {
	p.c.t.Helper()
	for shard := 0; shard < 2; shard++ {
		p.append(shard, batches, rows)
		p.seal(shard)
	}
}

// dumpIDs reads the id column of the table's latest version with the
// official LanceDB reader.
func (c *cluster) dumpIDs(table string) []int64 {
	c.t.Helper()
	d, err := oracle.MustFind(c.t).Dump(c.ctx, c.tablePath(table), oracle.DumpOptions{Columns: []string{"id"}})
	if err != nil {
		c.t.Fatal(err)
	}
	ids := make([]int64, 0, len(d.Columns["id"]))
	for _, raw := range d.Columns["id"] {
		ids = append(ids, parseID(c.t, raw))
	}
	if d.CountRows != len(ids) {
		c.t.Fatalf("official reader: count_rows %d, %d ids scanned", d.CountRows, len(ids))
	}
	return ids
}

func parseID(t *testing.T, raw json.RawMessage) int64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("id %s: %v", raw, err)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return id
}

// exactlyOnce checks, with the official reader, that the table holds every
// ACKed id exactly once and nothing else. It returns the number of rows.
func (p *producer) exactlyOnce() int {
	p.c.t.Helper()
	ids := p.c.dumpIDs(p.table)
	if err := compareIDs(ids, p.acked); err != nil {
		p.c.t.Fatalf("table %s (official reader): %v", p.table, err)
	}
	return len(ids)
}

func compareIDs(ids []int64, acked map[int64]row) error {
	seen := make(map[int64]int, len(ids))
	for _, id := range ids {
		seen[id]++
	}
	for id, n := range seen {
		if n != 1 {
			return fmt.Errorf("id %d appears %d times (%d rows, %d ACKed)", id, n, len(ids), len(acked))
		}
		if _, ok := acked[id]; !ok {
			return fmt.Errorf("id %d was never ACKed", id)
		}
	}
	var missing []int64
	for id := range acked {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%d ACKed ids missing (have %d of %d), first %d", len(missing), len(seen), len(acked), missing[0])
	}
	return nil
}

// allColumnsMatch reads every column with the official reader and compares
// each row with the values the producer had ACKed for its id.
func (p *producer) allColumnsMatch() {
	t := p.c.t
	t.Helper()
	d, err := oracle.MustFind(t).Dump(p.c.ctx, p.c.tablePath(p.table), oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, bodies, vecs := d.Columns["id"], d.Columns["body"], d.Columns["vec"]
	if len(ids) != len(p.acked) || len(bodies) != len(ids) || len(vecs) != len(ids) {
		t.Fatalf("official reader: %d ids, %d bodies, %d vecs; %d ACKed", len(ids), len(bodies), len(vecs), len(p.acked))
	}
	for i, raw := range ids {
		id := parseID(t, raw)
		want, ok := p.acked[id]
		if !ok {
			t.Fatalf("row %d: id %d never ACKed", i, id)
		}
		var body *string
		if err := json.Unmarshal(bodies[i], &body); err != nil {
			t.Fatalf("row %d body %s: %v", i, bodies[i], err)
		}
		if (body == nil) != (want.body == nil) || (body != nil && *body != *want.body) {
			t.Fatalf("id %d: body %s, ACKed %v", id, bodies[i], deref(want.body))
		}
		var vec []float64
		if err := json.Unmarshal(vecs[i], &vec); err != nil {
			t.Fatalf("row %d vec %s: %v", i, vecs[i], err)
		}
		if (vec == nil) != (want.vec == nil) || len(vec) != len(want.vec) {
			t.Fatalf("id %d: vec %s, ACKed %v", id, vecs[i], want.vec)
		}
		for k := range vec {
			if vec[k] != float64(want.vec[k]) {
				t.Fatalf("id %d: vec[%d] = %v, ACKed %v", id, k, vec[k], want.vec[k])
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return strconv.Quote(*s)
}
