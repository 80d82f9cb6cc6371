package walraft

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// resolveRun finishes a run that a crash interrupted, before raft starts.
// The progress record names the run's raft entries and each shard's last
// position before it; the engine keeps a prefix of each shard's appends
// (recovery cuts a torn tail), so the first landed-count valid appends of
// each shard are skipped and the rest applied, in log order. The record
// then covers the whole run.
func (f *fsm) resolveRun(logs raft.LogStore) error {
	r := f.applied.rec
	if !r.Pending || r.Last == 0 {
		return nil
	}
	ctx := context.Background()
	skip := map[runKey]uint64{}
	for _, rs := range r.Run {
		cur, err := f.lastPosition(ctx, rs.Table, rs.Shard)
		if errors.Is(err, errUndecidable) {
			return err
		}
		if err != nil {
			continue // unknown table or shard: its appends were refused
		}
		if cur < rs.Before {
			return fmt.Errorf("%s shard %d ends at %d, before the interrupted run it was at %d: %w", rs.Table, rs.Shard, cur, rs.Before, errs.ErrCorrupt)
		}
		skip[runKey{rs.Table, rs.Shard}] = cur - rs.Before
	}
	landed := 0
	for i := r.Index; i <= r.Last; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("progress record names raft entries %d..%d in doubt, but entry %d is unreadable (%v): %w", r.Index, r.Last, i, err, errs.ErrCorrupt)
		}
		c, err := decodeCommand(l.Data)
		if err != nil {
			return err
		}
		done, err := f.resolveAppend(ctx, c, skip)
		if err != nil {
			return fmt.Errorf("finish interrupted run at raft index %d: %w", i, err)
		}
		if done {
			landed++
		}
	}
	for k, n := range skip {
		if n > 0 {
			return fmt.Errorf("%s shard %d holds %d more entries than the interrupted run appended: %w", k.table, k.shard, n, errs.ErrCorrupt)
		}
	}
	if err := f.applied.write(appliedRec{Index: r.Last}); err != nil {
		return err
	}
	f.index.Store(r.Last)
	f.log.Info("walraft: finished an interrupted run of appends", "from", r.Index, "to", r.Last, "already_applied", landed)
	return nil
}

// resolveAppend skips c if it landed before the crash (done) or applies it.
func (f *fsm) resolveAppend(ctx context.Context, c command, skip map[runKey]uint64) (done bool, err error) {
	if !c.Op.isAppend() {
		return false, fmt.Errorf("a run holds a %v command: %w", c.Op, errs.ErrCorrupt)
	}
	raw, release, err := f.entry(ctx, c)
	if err == nil {
		defer release()
		err = f.eng.CheckEncoded(ctx, c.Table, c.Shard, raw)
	}
	if err != nil {
		if deterministic(err) {
			return false, nil // refused then, refused now
		}
		return false, err
	}
	k := runKey{c.Table, c.Shard}
	if skip[k] > 0 {
		skip[k]--
		return true, nil
	}
	f.clk.set(c.time())
	defer f.clk.clear()
	if _, err := f.eng.AppendEncoded(ctx, c.Table, c.Shard, [][]byte{raw}); err != nil && !deterministic(err) {
		return false, err
	}
	return false, nil
}
