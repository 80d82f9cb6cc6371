package walflight

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/walctl/walctl/internal/core/errs"
)

// ErrServerUnavailable means the WAL server could not be reached, broke the
// connection, or did not answer within the client's CallTimeout. It is in
// the ErrUnavailable category. The outcome of a mutating call that fails
// with it is unknown (see each method). A publisher that meets it gives its
// claim up rather than hold a table it cannot publish (issue 12 item 4).
var ErrServerUnavailable = fmt.Errorf("WAL server unavailable: %w", errs.ErrUnavailable)

// errIdle is the cause with which a streaming read is cancelled when the
// server sends nothing for CallTimeout.
var errIdle = errors.New("WAL read idle for the whole call timeout")

// callCtx bounds one unary call by the client's CallTimeout.
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// fromStatus converts the failure of an RPC made on call, derived from the
// caller's parent context. The caller's own cancellation is reported with
// its cause, so a read stopped because its claim was lost says so and still
// wraps the claim's sentinel (errs.ErrFenced) rather than becoming a bare
// "context canceled"; the call's own deadline is ErrServerUnavailable; any
// other failure is converted from its gRPC status.
func (c *Client) fromStatus(parent, call context.Context, op string, err error) error {
	if perr := parent.Err(); perr != nil {
		if cause := context.Cause(parent); cause != perr {
			return fmt.Errorf("WAL server %s: %s stopped: %w", c.addr, op, cause)
		}
		return fmt.Errorf("WAL server %s: %s: %w: %w", c.addr, op, perr, errs.ErrUnavailable)
	}
	// The server may see the propagated deadline pass a moment before the
	// client does and end the stream with DeadlineExceeded itself.
	if call.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
		return c.noAnswer(op, "no answer within "+c.timeout.String())
	}
	return fromStatus(call, c.addr, err)
}

func (c *Client) noAnswer(op, what string) error {
	return fmt.Errorf("WAL server %s: %s: %s (--command-timeout): %w", c.addr, op, what, ErrServerUnavailable)
}

// idleTimer runs f once d passes without resume being called after pause:
// the per-message deadline of a streaming read. Time spent between pause
// and resume (the consumer's) does not count.
type idleTimer struct {
	d time.Duration
	t *time.Timer
}

func newIdleTimer(d time.Duration, f func()) *idleTimer {
	return &idleTimer{d: d, t: time.AfterFunc(d, f)}
}

func (i *idleTimer) pause()  { i.t.Stop() }
func (i *idleTimer) resume() { i.t.Reset(i.d) }
func (i *idleTimer) stop()   { i.t.Stop() }
