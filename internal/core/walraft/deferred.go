package walraft

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// deferral describes the appends applied since the last checkpoint: written
// to the engine without a sync (wal.Engine.AppendBatchUnsynced), durable
// only in the raft log. The progress record names it (start and each
// shard's last position before it) before the first of a shard's appends
// is written, so that after a crash the engine's surviving prefix of each
// shard is known and the rest is redone from the raft log (replay).
type deferral struct {
	start  uint64            // raft index of its first append; 0: none
	before map[runKey]uint64 // each shard's last position before start
	tail   map[runKey]uint64 // each shard's last position written since
}

// position is the shard's last position, written or durable.
func (f *fsm) position(ctx context.Context, k runKey) uint64 {
	if p, ok := f.def.tail[k]; ok {
		return p
	}
	p, _ := f.lastPosition(ctx, k.table, k.shard)
	return p
}

// deferShards adds the shards of a run starting at raft index first to the
// deferral, recording it durably when a shard is new to it. A deferral
// grown past maxRunShards is checkpointed first.
func (f *fsm) deferShards(ctx context.Context, first uint64, keys []runKey) error {
	fresh := 0
	for _, k := range keys {
		if _, ok := f.def.before[k]; !ok {
			fresh++
		}
	}
	if fresh == 0 && f.def.start != 0 {
		return nil
	}
	if len(f.def.before)+fresh > maxRunShards {
		if err := f.checkpoint(ctx, true); err != nil {
			return err
		}
	}
	if f.def.start == 0 {
		f.def = deferral{start: first, before: map[runKey]uint64{}, tail: map[runKey]uint64{}}
	}
	rec := appliedRec{Index: f.def.start, Pending: true}
	for _, k := range keys {
		if _, ok := f.def.before[k]; !ok {
			f.def.before[k] = f.position(ctx, k)
		}
	}
	for k, b := range f.def.before {
		rec.Run = append(rec.Run, runShard{Table: k.table, Shard: k.shard, Before: b})
	}
	return f.applied.write(rec)
}

// checkpoint makes the deferral's appends durable in the engine and, when
// record is set, records everything applied so far as settled; without it
// the caller writes a record that supersedes the deferral's.
func (f *fsm) checkpoint(ctx context.Context, record bool) error {
	if f.def.start == 0 {
		return nil
	}
	if err := f.eng.Sync(ctx); err != nil {
		return err
	}
	if record {
		if err := f.applied.write(appliedRec{Index: f.index.Load()}); err != nil {
			return err
		}
	}
	f.def = deferral{}
	return nil
}

// startReplay resumes the deferral a crash interrupted: per shard, the
// engine kept a prefix of its appends from the deferral's start on; raft
// replays them from the log and the first landed ones are skipped
// (replayOne). The deferral stays open: later appends join it.
func (f *fsm) startReplay(r appliedRec) error {
	ctx := context.Background()
	f.def = deferral{start: r.Index, before: map[runKey]uint64{}, tail: map[runKey]uint64{}}
	f.replay, f.replayPos = map[runKey]uint64{}, map[runKey]uint64{}
	for _, rs := range r.Run {
		k := runKey{rs.Table, rs.Shard}
		f.def.before[k] = rs.Before
		cur, err := f.lastPosition(ctx, rs.Table, rs.Shard)
		if err != nil {
			continue // unknown table or shard: its appends were refused
		}
		if cur < rs.Before {
			return fmt.Errorf("%s shard %d ends at %d, before the interrupted appends it was at %d: %w", rs.Table, rs.Shard, cur, rs.Before, errs.ErrCorrupt)
		}
		if cur > rs.Before {
			f.replay[k], f.replayPos[k] = cur-rs.Before, rs.Before
		}
	}
	f.log.Info("walraft: appends from raft index on are redone from the raft log beyond what the engine kept", "from", r.Index, "kept", fmt.Sprint(f.replay))
	if len(f.replay) == 0 {
		f.replay = nil
	}
	return nil
}

// replayOne applies l while a replay is in progress: an append the engine
// kept is skipped (it landed at the next position of its shard); anything
// else is applied as usual. Once every shard's landed appends are passed
// the replay ends. A command other than an append before that means the
// engine holds appends the log does not: damage.
func (f *fsm) replayOne(l *raft.Log) any {
	c, err := decodeCommand(l.Data)
	if l.Type != raft.LogCommand || l.Index <= f.index.Load() || err != nil {
		return f.Apply(l)
	}
	k := runKey{c.Table, c.Shard}
	if c.Op != opAppend {
		return f.fail(l.Index, fmt.Errorf("the engine holds %v more appends than the raft log before this %v command: %w", f.replay, c.Op, errs.ErrCorrupt))
	}
	if f.replay[k] == 0 {
		out := make([]any, 1)
		f.applyRun([]*raft.Log{l}, out)
		return out[0]
	}
	rec, err := decodeRecord(c.Payload)
	if err != nil {
		return f.fail(l.Index, err)
	}
	defer rec.Release()
	if err := f.eng.CheckAppend(context.Background(), c.Table, c.Shard, rec); err != nil {
		if !deterministic(err) {
			return f.fail(l.Index, err)
		}
		f.index.Store(l.Index)
		return result{err: err} // refused then, refused now
	}
	f.replayPos[k]++
	if f.replay[k]--; f.replay[k] == 0 {
		delete(f.replay, k)
	}
	if len(f.replay) == 0 {
		f.replay = nil
	}
	f.index.Store(l.Index)
	return result{pos: f.replayPos[k]}
}
