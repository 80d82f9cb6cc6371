package exactlyonce

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
)

// ShardPos is one WAL position of a shard.
type ShardPos struct {
	Shard int
	Pos   uint64
}

// Reader reads a shard's entries back (wal.Log's Read).
type Reader interface {
	Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error
}

// ReadBack reads, from r, every ACKed position of table above its shard's
// trimmed-through position (trimmed, by shard) and compares what is there
// with what was ACKed there (ComparePositions); a read that fails is a
// violation too.
func ReadBack(ctx context.Context, r Reader, table string, acks []Ack, trimmed map[int]uint64) []string {
	got := map[ShardPos][]int64{}
	var problems []string
	unread := map[int]uint64{} // shard → first position a failed read did not deliver
	for shard, to := range maxPositions(acks) {
		from := trimmed[shard] + 1
		if to < from {
			continue
		}
		next := from
		err := r.Read(ctx, table, shard, from, to, func(e wal.Entry) error {
			next = e.Position + 1
			idx := e.Record.Schema().FieldIndices(synth.IDField)
			if len(idx) == 0 {
				return fmt.Errorf("shard %d position %d: no %q column", shard, e.Position, synth.IDField)
			}
			ids, ok := e.Record.Column(idx[0]).(*array.Int64)
			if !ok {
				return fmt.Errorf("shard %d position %d: column %q is %s", shard, e.Position, synth.IDField, e.Record.Column(idx[0]).DataType())
			}
			got[ShardPos{shard, e.Position}] = slices.Clone(ids.Int64Values())
			return nil
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("shard %d: ACKed positions %d…%d cannot be read back: %v", shard, next, to, err))
			unread[shard] = next
		}
	}
	// Positions a failed read did not reach are reported by that failure.
	var readable []Ack
	for _, a := range acks {
		if first, ok := unread[a.Shard]; !ok || a.Pos < first {
			readable = append(readable, a)
		}
	}
	return append(problems, ComparePositions(readable, trimmed, got)...)
}

func maxPositions(acks []Ack) map[int]uint64 {
	out := map[int]uint64{}
	for _, a := range acks {
		out[a.Shard] = max(out[a.Shard], a.Pos)
	}
	return out
}

// ComparePositions compares what a WAL holds (got: the ids at each
// position read back) with what was ACKed at each position above the
// shard's trimmed-through position: an ACKed position must still hold the
// very ids it was ACKed with, in order. A position that is gone, or
// reissued to another batch after a crash, fails.
func ComparePositions(acks []Ack, trimmed map[int]uint64, got map[ShardPos][]int64) []string {
	var f findings
	owner := map[ShardPos]Range{}
	for _, a := range acks {
		at := ShardPos{a.Shard, a.Pos}
		if prev, ok := owner[at]; ok {
			f.add("shard %d position %d was ACKed twice: to ids %s and to ids %s", a.Shard, a.Pos, prev, a.IDs)
		}
		owner[at] = a.IDs
		if a.Pos <= trimmed[a.Shard] {
			continue
		}
		ids, ok := got[at]
		switch {
		case !ok:
			f.add("shard %d position %d (ACKed with ids %s) is gone from the WAL", a.Shard, a.Pos, a.IDs)
		case !sameRange(ids, a.IDs):
			f.add("shard %d position %d was ACKed with ids %s and now holds %d other rows (%s): a position reissued with other content",
				a.Shard, a.Pos, a.IDs, len(ids), describe(ids))
		}
	}
	return f.done()
}

// sameRange reports whether ids are exactly r's ids, in order.
func sameRange(ids []int64, r Range) bool {
	if int64(len(ids)) != r.Len() {
		return false
	}
	for i, id := range ids {
		if id != r.First+int64(i) {
			return false
		}
	}
	return true
}

func describe(ids []int64) string {
	if len(ids) == 0 {
		return "none"
	}
	return fmt.Sprintf("ids %d…%d", ids[0], ids[len(ids)-1])
}
