package walflight

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// errNotSent marks a call that failed before anything was sent to the
// server: its connection was not ready. Such a call is safe to send to
// another member of the group, even when it mutates.
var errNotSent = fmt.Errorf("request not sent: %w", ErrServerUnavailable)

// waitReady waits, within ctx, for cc to be connected. A connection that
// fails to connect (refused, TLS handshake refused) or is not ready when ctx
// ends (or the call timeout passes) yields errNotSent naming the state.
func (c *Client) waitReady(ctx context.Context, cc *grpc.ClientConn) error {
	budget := c.timeout
	if c.connectTimeout > 0 {
		budget = c.connectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for {
		st := cc.GetState()
		switch st {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			cc.Connect()
		case connectivity.TransientFailure, connectivity.Shutdown:
			return fmt.Errorf("WAL server %s: not connected (%s): %w", c.addr, st, errNotSent)
		}
		if !cc.WaitForStateChange(ctx, st) {
			return fmt.Errorf("WAL server %s: not connected within the deadline (%s): %w", c.addr, st, errNotSent)
		}
	}
}
