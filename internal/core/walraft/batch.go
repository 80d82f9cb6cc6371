package walraft

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// maxRunShards bounds the shards of one run and of a deferral, so its
// progress record fits its slot.
const maxRunShards = 64

type runKey struct {
	table string
	shard int
}

// ApplyBatch implements raft.BatchingFSM. Consecutive appends are applied
// as a run: each shard's appends in log order, written without a sync
// (shards in parallel), the raft log being their durable copy (deferred.go).
// Anything else is applied one command at a time (Apply), after a
// checkpoint. While a crash's deferral is being redone, commands are
// applied one at a time (replayOne).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i := 0; i < len(logs); {
		if f.replay != nil {
			out[i] = f.replayOne(logs[i])
			i++
			continue
		}
		j, shards := i, map[runKey]bool{}
		for ; j < len(logs); j++ {
			c, ok := f.freshAppend(logs[j])
			if !ok || (!shards[runKey{c.Table, c.Shard}] && len(shards) == maxRunShards) {
				break
			}
			shards[runKey{c.Table, c.Shard}] = true
		}
		if j == i {
			out[i] = f.Apply(logs[i])
			i++
			continue
		}
		f.applyRun(logs[i:j], out[i:j])
		i = j
	}
	return out
}

// freshAppend decodes l if it is an append not yet applied and not in doubt.
func (f *fsm) freshAppend(l *raft.Log) (command, bool) {
	if l.Type != raft.LogCommand || l.Index <= f.index.Load() || f.broken.Load() != nil {
		return command{}, false
	}
	if p := f.pending; p != nil && p.Index == l.Index {
		return command{}, false
	}
	c, err := decodeCommand(l.Data)
	return c, err == nil && c.Op == opAppend
}

// applyRun applies consecutive appends in log order, each with the engine
// clock at its command's time (a generation closed by size records the
// time of the append that closed it, the same on every replica), written
// without a sync (deferred.go).
func (f *fsm) applyRun(logs []*raft.Log, out []any) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ctx := context.Background()
	cmds := make([]command, len(logs))
	var keys []runKey
	seen := map[runKey]bool{}
	for i, l := range logs {
		cmds[i], _ = decodeCommand(l.Data)
		if k := (runKey{cmds[i].Table, cmds[i].Shard}); !seen[k] {
			seen[k], keys = true, append(keys, k)
		}
	}
	if err := f.deferShards(ctx, logs[0].Index, keys); err != nil {
		fillErr(out, f.fail(logs[0].Index, err).err)
		return
	}
	defer f.clk.clear()
	for i, c := range cmds {
		res, err := f.applyAppend(ctx, c)
		if err != nil {
			fillErr(out[i:], f.fail(logs[i].Index, err).err)
			return
		}
		out[i] = res
		f.index.Store(logs[i].Index)
	}
}

func fillErr(out []any, err error) {
	for i := range out {
		out[i] = result{err: err}
	}
}

// applyAppend writes one append without a sync; a refusal every replica
// makes alike is its result, any other error is local (I/O): the replica
// stops applying.
func (f *fsm) applyAppend(ctx context.Context, c command) (result, error) {
	rec, err := decodeRecord(c.Payload)
	if err != nil {
		return result{}, err
	}
	defer rec.Release()
	k := runKey{c.Table, c.Shard}
	want := f.position(ctx, k) + 1
	f.clk.set(c.time())
	pos, err := f.eng.AppendBatchUnsynced(ctx, c.Table, c.Shard, []arrow.RecordBatch{rec})
	if err != nil {
		if deterministic(err) {
			return result{err: err}, nil
		}
		return result{}, err
	}
	if pos[0] != want {
		return result{}, fmt.Errorf("%s shard %d: append landed at position %d, expected %d: %w", c.Table, c.Shard, pos[0], want, errs.ErrCorrupt)
	}
	f.def.tail[k] = pos[0]
	return result{pos: pos[0]}, nil
}

// lastPosition is the shard's last position (0 with an error for an
// unknown table or shard: its appends will be refused alike everywhere).
func (f *fsm) lastPosition(ctx context.Context, table string, shard int) (uint64, error) {
	gens, err := f.eng.Generations(ctx, table, shard)
	if err != nil {
		return 0, err
	}
	if len(gens) > 0 {
		return gens[len(gens)-1].Last, nil
	}
	st, err := f.eng.Stats(ctx, table, nil)
	if err != nil || shard >= len(st.Shards) {
		return 0, err
	}
	return st.Shards[shard].LastPosition, nil
}
