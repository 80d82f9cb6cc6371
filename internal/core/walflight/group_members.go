package walflight

import "context"

// Members lists the group as the server's replica sees it.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var ms []Member
	err := c.do(ctx, ActionMembers, replicaReq{}, &ms)
	return ms, err
}

// AddReplica asks the server (the leader) to add id at peerAddr as a
// non-voter and promote it once caught up.
func (c *Client) AddReplica(ctx context.Context, id, peerAddr string) error {
	return c.do(ctx, ActionAddReplica, replicaReq{ID: id, PeerAddr: peerAddr}, &emptyResp{})
}

// RemoveReplica asks the server (the leader) to remove id from the group.
func (c *Client) RemoveReplica(ctx context.Context, id string) error {
	return c.do(ctx, ActionRemoveReplica, replicaReq{ID: id}, &emptyResp{})
}

// TransferLeader asks the server (the leader) to hand leadership to id
// ("" = any caught-up voter).
func (c *Client) TransferLeader(ctx context.Context, id string) error {
	return c.do(ctx, ActionTransferLeader, replicaReq{ID: id}, &emptyResp{})
}

// Members lists the group's replicas as its leader sees them (progress and
// lag are the leader's view); when no leader answers, as any member sees
// them.
func (g *GroupClient) Members(ctx context.Context) (ms []Member, err error) {
	err = g.run(ctx, "members", idempotent, g.leaderIdx(), func(ctx context.Context, c *Client) (err error) {
		ms, err = c.Members(ctx)
		return err
	})
	return ms, err
}

// AddReplica adds a replica through the leader (see Replica.AddReplica).
// An ambiguous failure is ErrOutcomeUnknown: Members tells.
func (g *GroupClient) AddReplica(ctx context.Context, id, peerAddr string) error {
	return g.run(ctx, "add replica "+id, mutation, g.leaderIdx(), func(ctx context.Context, c *Client) error {
		return c.AddReplica(ctx, id, peerAddr)
	})
}

// RemoveReplica removes a replica through the leader. An ambiguous failure
// is ErrOutcomeUnknown: Members tells.
func (g *GroupClient) RemoveReplica(ctx context.Context, id string) error {
	return g.run(ctx, "remove replica "+id, mutation, g.leaderIdx(), func(ctx context.Context, c *Client) error {
		return c.RemoveReplica(ctx, id)
	})
}

// TransferLeader hands leadership over through the current leader. An
// ambiguous failure is ErrOutcomeUnknown: Members tells who leads.
func (g *GroupClient) TransferLeader(ctx context.Context, id string) error {
	return g.run(ctx, "transfer leadership", mutation, g.leaderIdx(), func(ctx context.Context, c *Client) error {
		return c.TransferLeader(ctx, id)
	})
}
