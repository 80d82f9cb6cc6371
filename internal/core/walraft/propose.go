package walraft

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// ErrNotProposed marks a mutation that timed out before it entered the raft
// log (the leader's queue was full): safe to retry.
var ErrNotProposed = fmt.Errorf("command not proposed before the deadline: %w", errs.ErrUnavailable)

func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	_, hostport := splitRaftAddr(addr)
	return &NotLeaderError{ID: n.ident.ID, LeaderID: string(id), LeaderAddr: hostport}
}

// propose puts c through the raft log and returns the result of applying
// it on this replica (the leader). Errors that prove c never entered the
// log are *NotLeaderError or ErrNotProposed; a failure after it entered the
// log is ErrOutcomeUnknown; deterministic rejections (every replica refused
// c identically) are returned as the engine gave them.
func (n *Node) propose(ctx context.Context, c command) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, fmt.Errorf("%w: %w", ErrNotProposed, err)
	}
	if n.raft.State() != raft.Leader {
		return result{}, n.notLeader()
	}
	c.Time = n.cfg.Clock.Now().UnixNano()
	f := n.raft.Apply(c.encode(), timeoutOf(ctx))
	if err, ctxErr := await(ctx, f); ctxErr != nil {
		return result{}, fmt.Errorf("%s %s: %w (%w)", c.Op, c.Table, ErrOutcomeUnknown, ctxErr)
	} else if err != nil {
		return result{}, n.classify(c, err)
	}
	res, _ := f.Response().(result)
	if res.err != nil && !deterministic(res.err) {
		return res, fmt.Errorf("%s %s: %w: %w", c.Op, c.Table, ErrOutcomeUnknown, res.err)
	}
	return res, res.err
}

// await waits for f or for ctx, whichever ends first: f's error, or ctx's
// error if ctx ended first (f's outcome is then not known).
func await(ctx context.Context, f raft.Future) (err, ctxErr error) {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (n *Node) classify(c command, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%s %s: %w", c.Op, c.Table, ErrNotProposed)
	}
	return fmt.Errorf("%s %s: %w (%v)", c.Op, c.Table, ErrOutcomeUnknown, err)
}
