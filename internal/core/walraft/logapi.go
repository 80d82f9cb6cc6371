package walraft

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hashicorp/raft"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// CreateTable implements wal.Log through the raft log (leader only). It is
// idempotent, so an ambiguous outcome is resolved by calling it again.
func (n *Node) CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (wal.TableInfo, error) {
	if err := wal.ValidateName(name); err != nil {
		return wal.TableInfo{}, err
	}
	sb, err := encodeSchema(schema)
	if err != nil {
		return wal.TableInfo{}, err
	}
	res, err := n.propose(ctx, command{Op: opCreate, Table: name, Shards: shards, Payload: sb})
	return res.info, err
}

// precheck refuses, before proposal, a mutation naming a table or shard the
// leader's applied state does not have, so such mistakes never enter the
// log. The FSM checks again at apply time.
func (n *Node) precheck(ctx context.Context, table string, shard int) error {
	if err := n.leaderOnly(); err != nil {
		return err // a lagging follower may not know the table yet: redirect first
	}
	info, err := n.localTable(ctx, table)
	if err != nil {
		return err
	}
	if shard < 0 || shard >= info.Shards {
		return fmt.Errorf("table %q has shards 0..%d, got shard %d: %w", table, info.Shards-1, shard, wal.ErrBadShard)
	}
	return nil
}

// encodeAppend validates rec with the engine's own checks on the leader, so
// a record every replica would refuse (unknown table or shard, another
// schema, too large) never enters the log, and returns the entry bytes the
// replicas will store; the caller releases them.
func (n *Node) encodeAppend(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (wal.Encoded, error) {
	if err := n.leaderOnly(); err != nil {
		return wal.Encoded{}, err // a lagging follower may not know the table yet: redirect first
	}
	eng, release, err := n.fsm.engine()
	if err != nil {
		return wal.Encoded{}, err
	}
	defer release()
	return eng.Encode(ctx, table, shard, rec)
}

func (n *Node) localTable(ctx context.Context, table string) (wal.TableInfo, error) {
	eng, release, err := n.fsm.engine()
	if err != nil {
		return wal.TableInfo{}, err
	}
	defer release()
	return eng.Table(ctx, table)
}

// Append implements wal.Log: the position is returned once a quorum has the
// entry durably and this leader has applied it. On a non-leader it fails
// with *NotLeaderError before proposal. An ErrOutcomeUnknown failure is
// never retried here: the entry may be at some position or nowhere.
func (n *Node) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	enc, err := n.encodeAppend(ctx, table, shard, rec)
	if err != nil {
		return 0, err
	}
	defer enc.Release()
	res, err := n.propose(ctx, command{Op: opAppendEntry, Table: table, Shard: shard, Payload: enc.Raw})
	return res.pos, err
}

// Seal implements wal.Log through the raft log (leader only).
func (n *Node) Seal(ctx context.Context, table string, shard int) (wal.Generation, error) {
	if err := n.precheck(ctx, table, shard); err != nil {
		return wal.Generation{}, err
	}
	res, err := n.propose(ctx, command{Op: opSeal, Table: table, Shard: shard})
	return res.gen, err
}

// AdvanceEpoch implements wal.Log: the compare-and-swap is decided by the
// FSM in log order, so every replica agrees on the winner.
func (n *Node) AdvanceEpoch(ctx context.Context, table string, expect uint64) (uint64, error) {
	if err := n.precheck(ctx, table, 0); err != nil {
		return 0, err
	}
	res, err := n.propose(ctx, command{Op: opAdvance, Table: table, Expect: expect})
	return res.epoch, err
}

// Trim implements wal.Log through the raft log (leader only).
func (n *Node) Trim(ctx context.Context, table string, shard int, through, epoch uint64) (uint64, error) {
	if err := n.precheck(ctx, table, shard); err != nil {
		return 0, err
	}
	res, err := n.propose(ctx, command{Op: opTrim, Table: table, Shard: shard, Through: through, Epoch: epoch})
	return res.trim, err
}

// LinearizableRead makes the reads that follow reflect every command the
// group committed before the call: on the leader it commits and applies a
// raft barrier (so a deposed or stale leader fails instead of answering);
// on a follower it fails with *NotLeaderError, before doing anything. A
// barrier that fails for another reason (lost quorum, the deadline) is
// errs.ErrUnavailable: nothing was changed, the read may be sent again.
func (n *Node) LinearizableRead(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	err, ctxErr := await(ctx, n.raft.Barrier(timeoutOf(ctx)))
	switch {
	case ctxErr != nil:
		return fmt.Errorf("replica %s: read barrier: %w: %w", n.ident.ID, ctxErr, errs.ErrUnavailable)
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	}
	return fmt.Errorf("replica %s: read barrier: %v: %w", n.ident.ID, err, errs.ErrUnavailable)
}

// readable refuses reads on a replica that has not applied everything it
// knows the group committed, or has never heard from a group.
func (n *Node) readable() (*wal.Engine, func(), error) {
	if err := n.caughtUp(); err != nil {
		return nil, nil, err
	}
	return n.fsm.engine()
}

// caughtUp checks that every command up to the commit index this replica
// knows has been applied here. raft's own applied index counts entries
// handed to the FSM, not applied by it, so the log is consulted for the
// entries between the FSM's progress and the commit index: only
// configuration and no-op entries may remain there.
func (n *Node) caughtUp() error {
	commit := n.raft.CommitIndex()
	if commit == 0 {
		return fmt.Errorf("replica %s has not joined a group yet (nothing committed): %w", n.ident.ID, ErrBehind)
	}
	applied := n.fsm.index.Load()
	for i := max(applied, n.checked.Load()) + 1; i <= commit; i++ {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("replica %s has applied raft index %d of %d committed (%v): %w", n.ident.ID, applied, commit, err, ErrBehind)
		}
		if l.Type == raft.LogCommand {
			return fmt.Errorf("replica %s has applied raft index %d of %d committed: %w", n.ident.ID, applied, commit, ErrBehind)
		}
	}
	n.checked.Store(max(commit, n.checked.Load()))
	return nil
}

// Table implements wal.Log from this replica's applied state.
func (n *Node) Table(ctx context.Context, name string) (wal.TableInfo, error) {
	eng, release, err := n.readable()
	if err != nil {
		return wal.TableInfo{}, err
	}
	defer release()
	return eng.Table(ctx, name)
}

// Tables implements wal.Log from this replica's applied state.
func (n *Node) Tables(ctx context.Context) ([]wal.TableInfo, error) {
	eng, release, err := n.readable()
	if err != nil {
		return nil, err
	}
	defer release()
	return eng.Tables(ctx)
}

// Generations implements wal.Log from this replica's applied state.
func (n *Node) Generations(ctx context.Context, table string, shard int) ([]wal.Generation, error) {
	eng, release, err := n.readable()
	if err != nil {
		return nil, err
	}
	defer release()
	return eng.Generations(ctx, table, shard)
}

// Read implements wal.Log from this replica's applied state: positions it
// has not applied fail with wal.ErrBeyondEnd, never a shorter result.
func (n *Node) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	eng, release, err := n.readable()
	if err != nil {
		return err
	}
	defer release()
	return eng.Read(ctx, table, shard, from, to, fn)
}

// Epoch implements wal.Log from this replica's applied state.
func (n *Node) Epoch(ctx context.Context, table string) (uint64, error) {
	eng, release, err := n.readable()
	if err != nil {
		return 0, err
	}
	defer release()
	return eng.Epoch(ctx, table)
}

// Stats implements wal.Log from this replica's applied state.
func (n *Node) Stats(ctx context.Context, table string, watermarks map[int]uint64) (wal.TableStats, error) {
	eng, release, err := n.readable()
	if err != nil {
		return wal.TableStats{}, err
	}
	defer release()
	return eng.Stats(ctx, table, watermarks)
}
