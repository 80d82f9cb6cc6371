package verify

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
)

// verifier holds one verification's state.
type verifier struct {
	ctx    context.Context
	log    wal.Log
	table  string
	h      hasher
	shards map[int]*ShardReport
	rep    *Report
	// above counts the rows of retained WAL entries above the watermark:
	// none of them may be in the table.
	above multiset
}

// retained reports whether positions from–to of shard s are still in the
// WAL (not trimmed, durable).
func (v *verifier) retained(s int, from, to uint64) bool {
	sr := v.shards[s]
	return sr != nil && from > sr.TrimmedThrough && to <= sr.LastPosition && from <= to
}

// read streams positions from–to of shard s.
func (v *verifier) read(s int, from, to uint64, fn func(wal.Entry) error) error {
	err := v.log.Read(v.ctx, v.table, s, from, to, fn)
	if err != nil {
		return fmt.Errorf("read WAL %s shard %d positions %d–%d: %w", v.table, s, from, to, err)
	}
	return nil
}

// pending hashes the rows of every retained entry above the watermark.
func (v *verifier) pending() error {
	v.above = multiset{}
	for s, sr := range v.shards {
		from := max(sr.Watermark, sr.TrimmedThrough) + 1
		if from > sr.LastPosition {
			continue
		}
		err := v.read(s, from, sr.LastPosition, func(e wal.Entry) error {
			sr.PendingEntries++
			v.h.add(v.above, e.Record, 1)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// abovePending counts the rows of rec that are records above a watermark.
func (v *verifier) abovePending(rec arrow.RecordBatch) int64 {
	if len(v.above) == 0 {
		return 0
	}
	var n int64
	for _, h := range v.h.rows(rec) {
		if v.above[h] > 0 {
			n++
		}
	}
	return n
}

// rangeRows counts the records of positions from–to of shard s, or returns
// fallback when they are no longer in the WAL.
func (v *verifier) rangeRows(s int, from, to uint64, fallback int64) (int64, error) {
	if !v.retained(s, from, to) {
		return fallback, nil
	}
	var n int64
	err := v.read(s, from, to, func(e wal.Entry) error {
		n += e.Record.NumRows()
		return nil
	})
	return n, err
}

// fragment compares the rows of one published file with the WAL entries of
// its range, when they are still retained.
func (v *verifier) fragment(id int64, rng publish.Range, rec arrow.RecordBatch) error {
	if !v.retained(rng.Shard, rng.From, rng.To) {
		v.rep.UncomparedRows += rec.NumRows()
		v.rep.UncomparedFragments++
		return nil
	}
	want := multiset{}
	var entries int64
	err := v.read(rng.Shard, rng.From, rng.To, func(e wal.Entry) error {
		entries++
		v.h.add(want, e.Record, 1)
		return nil
	})
	if err != nil {
		return err
	}
	v.shards[rng.Shard].CheckedEntries += entries
	v.rep.CheckedRows += rec.NumRows()
	got := multiset{}
	v.h.add(got, rec, 1)
	var missing, dup, unexpected int64
	for h, n := range got {
		switch w := want[h]; {
		case n > w && w > 0:
			dup += n - w
		case n > w:
			unexpected += n
		}
	}
	for h, w := range want {
		if n := got[h]; n < w {
			missing += w - n
		}
	}
	add := func(kind string, rows int64, what string) {
		if rows == 0 {
			return
		}
		v.problem(Problem{Kind: kind, Shard: rng.Shard, From: rng.From, To: rng.To, Fragment: ptr(id), Rows: rows,
			Detail: fmt.Sprintf("fragment %d (shard %d positions %d–%d): %d record(s) %s", id, rng.Shard, rng.From, rng.To, rows, what)})
	}
	add(KindMissing, missing, "of the WAL range are not in the file")
	add(KindDuplicated, dup, "of the WAL range are in the file more than once")
	add(KindUnexpected, unexpected, "in the file are not in its WAL range")
	v.rep.Missing += missing
	v.rep.Duplicated += dup
	v.rep.Unexpected += unexpected
	return nil
}
