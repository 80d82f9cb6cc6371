package walflight

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/metadata"

	"github.com/walctl/walctl/internal/core/wal"
)

// CreateTable implements wal.Log on the leader. It is idempotent, so an
// ambiguous failure is followed to another member like a read.
func (g *GroupClient) CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (info wal.TableInfo, err error) {
	err = g.run(ctx, "create table "+name, idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		info, err = c.CreateTable(ctx, name, schema, shards)
		return err
	})
	return info, err
}

// Table implements wal.Log (linearizable: from the leader, see linearizable).
func (g *GroupClient) Table(ctx context.Context, name string) (info wal.TableInfo, err error) {
	ctx = linearizable(ctx)
	err = g.run(ctx, "table "+name, idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		info, err = c.Table(ctx, name)
		return err
	})
	return info, err
}

// Tables implements wal.Log (linearizable).
func (g *GroupClient) Tables(ctx context.Context) (infos []wal.TableInfo, err error) {
	ctx = linearizable(ctx)
	err = g.run(ctx, "tables", idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		infos, err = c.Tables(ctx)
		return err
	})
	return infos, err
}

// Append implements wal.Log on the leader. A failure after the record was
// sent is ErrOutcomeUnknown and is not retried (see GroupClient).
func (g *GroupClient) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (pos uint64, err error) {
	err = g.run(ctx, "append to "+table, mutation, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		pos, err = c.Append(ctx, table, shard, rec)
		return err
	})
	return pos, err
}

// Seal implements wal.Log on the leader; ErrOutcomeUnknown: Generations
// tells whether it sealed.
func (g *GroupClient) Seal(ctx context.Context, table string, shard int) (gen wal.Generation, err error) {
	err = g.run(ctx, "seal "+table, mutation, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		gen, err = c.Seal(ctx, table, shard)
		return err
	})
	return gen, err
}

// Generations implements wal.Log (linearizable).
func (g *GroupClient) Generations(ctx context.Context, table string, shard int) (gens []wal.Generation, err error) {
	ctx = linearizable(ctx)
	err = g.run(ctx, "generations of "+table, idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		gens, err = c.Generations(ctx, table, shard)
		return err
	})
	return gens, err
}

// Epoch implements wal.Log (linearizable).
func (g *GroupClient) Epoch(ctx context.Context, table string) (e uint64, err error) {
	ctx = linearizable(ctx)
	err = g.run(ctx, "epoch of "+table, idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		e, err = c.Epoch(ctx, table)
		return err
	})
	return e, err
}

// AdvanceEpoch implements wal.Log on the leader; ErrOutcomeUnknown is
// resolved with Epoch, never by advancing again.
func (g *GroupClient) AdvanceEpoch(ctx context.Context, table string, expect uint64) (e uint64, err error) {
	err = g.run(ctx, "advance epoch of "+table, mutation, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		e, err = c.AdvanceEpoch(ctx, table, expect)
		return err
	})
	return e, err
}

// Trim implements wal.Log on the leader; ErrOutcomeUnknown: Stats tells.
func (g *GroupClient) Trim(ctx context.Context, table string, shard int, through, epoch uint64) (tt uint64, err error) {
	err = g.run(ctx, "trim "+table, mutation, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		tt, err = c.Trim(ctx, table, shard, through, epoch)
		return err
	})
	return tt, err
}

// Stats implements wal.Log (linearizable).
func (g *GroupClient) Stats(ctx context.Context, table string, watermarks map[int]uint64) (st wal.TableStats, err error) {
	ctx = linearizable(ctx)
	err = g.run(ctx, "stats of "+table, idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		st, err = c.Stats(ctx, table, watermarks)
		return err
	})
	return st, err
}

// Read implements wal.Log. An explicit range (to > 0) starts at the next
// member in turn (a replica that has not applied the whole range fails with
// wal.ErrBeyondEnd and the read moves on); to = 0 (up to the last committed
// entry) is linearizable and served by the leader. When a member fails
// mid-stream the read resumes on another after the last entry delivered,
// so fn sees each position once and in order.
func (g *GroupClient) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	start := g.leaderIdx()
	if to > 0 {
		start = int(g.rr.Add(1) % uint64(len(g.members)))
	} else {
		ctx = linearizable(ctx)
	}
	next := from
	var fnErr error
	err := g.run(ctx, "read "+table, stream, start, func(ctx context.Context, c *Client) error {
		if to > 0 && next > to {
			return nil
		}
		err := c.Read(ctx, table, shard, next, to, func(e wal.Entry) error {
			if err := fn(e); err != nil {
				fnErr = err
				return err
			}
			next = e.Position + 1
			return nil
		})
		if fnErr != nil {
			return errStopped // not retryable: fn's own error ends the read
		}
		return err
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

var errStopped = errors.New("read stopped by its callback")

// linearizable asks the server for a linearizable read: what a replica
// knows to be committed may be behind the group (a follower that lags or
// restarted, a leader not yet sure of its term), so a read that says what
// exists is served by the leader after a raft barrier, and a follower
// refuses it with a not-leader error that moves the call on.
func linearizable(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, mdRead, readLinearizable)
}
