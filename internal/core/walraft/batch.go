package walraft

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// maxRunShards bounds the shards of one run, so its progress record fits
// its slot.
const maxRunShards = 64

type runKey struct {
	table string
	shard int
}

// runGroup is one shard's appends within a run, in log order.
type runGroup struct {
	key    runKey
	before uint64
	idx    []int
	cmds   []command
}

// ApplyBatch implements raft.BatchingFSM. Consecutive appends are applied
// as a run: one progress record, then each shard's appends in log order
// with one engine sync per shard (shards in parallel). Anything else is
// applied one command at a time (Apply).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i := 0; i < len(logs); {
		j, shards := i, map[runKey]bool{}
		for ; j < len(logs); j++ {
			c, ok := f.freshAppend(logs[j])
			if !ok || (!shards[runKey{c.Table, c.Shard}] && len(shards) == maxRunShards) {
				break
			}
			shards[runKey{c.Table, c.Shard}] = true
		}
		if j-i < 2 {
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
	return c, err == nil && c.Op.isAppend()
}

func (f *fsm) applyRun(logs []*raft.Log, out []any) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ctx := context.Background()
	groups, order := map[runKey]*runGroup{}, []runKey(nil)
	rec := appliedRec{Index: logs[0].Index, Last: logs[len(logs)-1].Index, Pending: true}
	var last command
	for i, l := range logs {
		c, _ := decodeCommand(l.Data)
		k := runKey{c.Table, c.Shard}
		g := groups[k]
		if g == nil {
			g = &runGroup{key: k}
			var err error
			if g.before, err = f.lastPosition(ctx, c.Table, c.Shard); errors.Is(err, errUndecidable) {
				fillErr(out, f.fail(rec.Index, err).err)
				return
			}
			groups[k], order = g, append(order, k)
			rec.Run = append(rec.Run, runShard{Table: c.Table, Shard: c.Shard, Before: g.before})
		}
		g.idx, g.cmds = append(g.idx, i), append(g.cmds, c)
		last = c
	}
	if err := f.applied.write(rec); err != nil {
		fillErr(out, f.fail(rec.Index, err).err)
		return
	}
	f.clk.set(last.time())
	defer f.clk.clear()
	errCh := make(chan error, len(order))
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Add(1)
		go func(g *runGroup) {
			defer wg.Done()
			if err := f.applyGroup(ctx, g, out); err != nil {
				errCh <- err
			}
		}(groups[k])
	}
	wg.Wait()
	close(errCh)
	if err := <-errCh; err != nil {
		fillErr(out, f.fail(rec.Index, err).err)
		return
	}
	f.index.Store(rec.Last)
}

func fillErr(out []any, err error) {
	for i := range out {
		out[i] = result{err: err}
	}
}

// applyGroup appends one shard's commands of a run with one sync. If the
// engine refuses the batch (validation: nothing written), each append is
// applied alone, so every replica gets the outcome single appends give. A
// returned error is local (I/O): the replica stops applying.
func (f *fsm) applyGroup(ctx context.Context, g *runGroup, out []any) error {
	raws := make([][]byte, 0, len(g.cmds))
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	for _, c := range g.cmds {
		raw, release, err := f.entry(ctx, c)
		if err != nil {
			if deterministic(err) {
				return f.applyEach(ctx, g, out)
			}
			return err
		}
		raws, releases = append(raws, raw), append(releases, release)
	}
	pos, err := f.eng.AppendEncoded(ctx, g.key.table, g.key.shard, raws)
	if err == nil {
		for i, p := range pos {
			if p != g.before+uint64(i)+1 {
				return fmt.Errorf("%s shard %d: run landed at position %d, expected %d: %w", g.key.table, g.key.shard, p, g.before+uint64(i)+1, errs.ErrCorrupt)
			}
			out[g.idx[i]] = result{pos: p}
		}
		return nil
	}
	if !deterministic(err) {
		return err
	}
	return f.applyEach(ctx, g, out)
}

// applyEach applies a run's appends to one shard one at a time, each with
// its own outcome.
func (f *fsm) applyEach(ctx context.Context, g *runGroup, out []any) error {
	for i, c := range g.cmds {
		r := f.applyAppend(ctx, c)
		if r.err != nil && !deterministic(r.err) {
			return r.err
		}
		out[g.idx[i]] = r
	}
	return nil
}

// applyAppend appends one command's record (either payload format).
func (f *fsm) applyAppend(ctx context.Context, c command) result {
	raw, release, err := f.entry(ctx, c)
	if err != nil {
		return result{err: err}
	}
	defer release()
	pos, err := f.eng.AppendEncoded(ctx, c.Table, c.Shard, [][]byte{raw})
	if err != nil {
		return result{err: err}
	}
	return result{pos: pos[0]}
}

// entry is the engine's bytes for append command c: an opAppendEntry's
// payload as it is, or an opAppend's record stream decoded and encoded as
// the engine stores it (validated like any append). release frees them.
func (f *fsm) entry(ctx context.Context, c command) (raw []byte, release func(), err error) {
	if c.Op == opAppendEntry {
		return c.Payload, func() {}, nil
	}
	rec, err := decodeRecord(c.Payload)
	if err != nil {
		return nil, nil, err
	}
	defer rec.Release()
	enc, err := f.eng.Encode(ctx, c.Table, c.Shard, rec)
	if err != nil {
		return nil, nil, err
	}
	return enc.Raw, enc.Release, nil
}

// lastPosition is the shard's last position (0 with an error for an
// unknown table or shard: its appends will be refused alike everywhere;
// errUndecidable when the shard's end is unknown).
func (f *fsm) lastPosition(ctx context.Context, table string, shard int) (uint64, error) {
	if err := f.shardEndKnown(ctx, table, shard); err != nil {
		return 0, err
	}
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
