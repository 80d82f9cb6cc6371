package verify

import (
	"context"
	"fmt"

	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/wal"
)

// multiset counts rows by their content hash.
type multiset map[uint64]int64

// verifier holds one verification's state.
type verifier struct {
	ctx    context.Context
	log    wal.Log
	table  string
	hash   digest.Hash // the table's row hash: its digests' and every row's
	shards map[int]*ShardReport
	rep    *Report
	// above counts the rows of retained WAL entries above the watermark:
	// none of them may be in the table.
	above multiset
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
			for _, h := range v.hash.Rows(e.Record) {
				v.above[h]++
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// abovePending counts the rows among hashes that are records above a
// watermark.
func (v *verifier) abovePending(hashes []uint64) int64 {
	var n int64
	for _, h := range hashes {
		if v.above[h] > 0 {
			n++
		}
	}
	return n
}

// walPos is one ACKed record: a row of the entry at Position of Shard.
type walPos struct {
	shard int
	pos   uint64
}

// retained reads the records of shard s's positions from–to (retained by
// the WAL), indexed by row hash, in position order.
func (v *verifier) retained(s int, from, to uint64, into map[uint64][]walPos) error {
	sr := v.shards[s]
	return v.read(s, from, to, func(e wal.Entry) error {
		sr.WALEntries++
		sr.WALRecords += e.Record.NumRows()
		for _, h := range v.hash.Rows(e.Record) {
			into[h] = append(into[h], walPos{shard: s, pos: e.Position})
		}
		return nil
	})
}
