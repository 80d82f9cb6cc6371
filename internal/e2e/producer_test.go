package e2e

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
)

// producer appends synthetic batches to a table through the WAL server's
// Flight API and logs every ACKed record: its unique id and its values.
type producer struct {
	c     *cluster
	table string
	p     *exactlyonce.Producer
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
	ep, err := exactlyonce.NewProducer(c.wal, table, info.Schema, seed, int64(seed)*1_000_000, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	p := &producer{c: c, table: table, p: ep, acked: map[int64]row{}}
	ep.OnAck = p.remember
	return p
}

// remember logs the values of an ACKed batch by id.
func (p *producer) remember(b arrow.RecordBatch) {
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
		p.acked[ids.Value(j)] = r
	}
}

// append appends batches of rows records to shard; each is logged once ACKed.
func (p *producer) append(shard, batches, rows int) {
	p.c.t.Helper()
	for i := 0; i < batches; i++ {
		if err := p.p.Append(p.c.ctx, shard, rows); err != nil {
			p.c.t.Fatal(err)
		}
	}
}

// seal seals shard's open generation.
func (p *producer) seal(shard int) {
	p.c.t.Helper()
	if err := p.p.Seal(p.c.ctx, shard); err != nil {
		p.c.t.Fatal(err)
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

// exactlyOnce checks, with the official reader, that the table holds every
// ACKed id exactly once and nothing else. It returns the number of rows.
func (p *producer) exactlyOnce() int {
	p.c.t.Helper()
	ids, err := exactlyonce.OracleIDsWith(p.c.ctx, p.c.oracle(), p.c.tablePath(p.table))
	if err != nil {
		p.c.t.Fatal(err)
	}
	if err := exactlyonce.Check(ids, p.acked).Err(); err != nil {
		p.c.t.Fatalf("table %s (official reader): %v", p.table, err)
	}
	return len(ids)
}

// allColumnsMatch reads every column with the official reader and compares
// each row with the values the producer had ACKed for its id.
func (p *producer) allColumnsMatch() {
	t := p.c.t
	t.Helper()
	d, err := p.c.oracle().Dump(p.c.ctx, p.c.tablePath(p.table), oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, bodies, vecs := d.Columns["id"], d.Columns["body"], d.Columns["vec"]
	if len(ids) != len(p.acked) || len(bodies) != len(ids) || len(vecs) != len(ids) {
		t.Fatalf("official reader: %d ids, %d bodies, %d vecs; %d ACKed", len(ids), len(bodies), len(vecs), len(p.acked))
	}
	for i, raw := range ids {
		id, err := oracle.ParseInt64(raw)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
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
