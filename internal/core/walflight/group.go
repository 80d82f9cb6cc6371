package walflight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// GroupClient is a wal.Log backed by a replicated WAL group: the members'
// client addresses from configuration, a connection pool per member
// (dialled lazily), and calls that follow the leader.
//
// Every call, retries included, is bounded by ClientOptions.CallTimeout
// (`--command-timeout`). A call first goes to the member that last acted
// as leader; a member that refuses because it is not the leader
// (ErrNotLeader, refused before proposing) or whose connection is not ready
// (nothing was sent) is skipped for the next one, and after a round over
// every member the client backs off (50 ms doubling to 1 s) and tries again.
// When the deadline passes, the error wraps errs.ErrUnavailable and names
// every member tried with its last answer.
//
// A mutation that reached a replica and then failed without a verdict
// (lost connection, deadline, leadership lost after proposing) is never
// sent again: it fails with ErrOutcomeUnknown. For Append that is the
// contract with producers: the entry is wholly present at some position or
// absent, and only the producer, reading its shard back, may decide to send
// it again — the client never turns an ambiguous append into a duplicate.
//
// Reads may be served by any member that has applied the entries: a read of
// an explicit range (sealed generations, as publishers read) starts at the
// next member in turn, spreading publication load, and moves on to another
// member when one is unreachable or has not applied the range yet
// (ErrBeyondEnd), resuming after the last entry delivered. Reads that say
// what exists (tables, generations, epoch, stats, a read to the last
// position) are linearizable: they carry the walctl-read: linearizable
// metadata, which a follower refuses (it may lag the group) and the leader
// serves after a raft barrier.
type GroupClient struct {
	name    string
	members []*groupMember
	timeout time.Duration
	leader  atomic.Int64 // index of the member last seen leading
	rr      atomic.Uint64
}

type groupMember struct {
	addr  string
	share time.Duration // of the call timeout, for one attempt
	opts  ClientOptions
	once  sync.Once
	cli   *Client
	err   error
}

func (m *groupMember) client() (*Client, error) {
	m.once.Do(func() {
		m.cli, m.err = newClient(m.addr, m.opts, grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}))
		if m.cli != nil {
			m.cli.sendReady = true
			m.cli.connectTimeout = m.share
		}
	})
	return m.cli, m.err
}

var _ wal.Log = (*GroupClient)(nil)

// NewGroupClient returns a client of the group name whose members serve at
// addrs. It contacts nobody: connections are made on the first call.
func NewGroupClient(name string, addrs []string, opts ClientOptions) (*GroupClient, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("WAL group %q has no members: %w", name, errs.ErrInvalid)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	g := &GroupClient{name: name, timeout: opts.CallTimeout}
	for _, a := range addrs {
		g.members = append(g.members, &groupMember{addr: a, opts: opts, share: g.share(len(addrs))})
	}
	return g, nil
}

// Name is the group's name.
func (g *GroupClient) Name() string { return g.name }

// Close closes every member's connections.
func (g *GroupClient) Close() error {
	var first error
	for _, m := range g.members {
		m.once.Do(func() {}) // no later dial
		if m.cli != nil {
			if err := m.cli.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// callKind says how a failure after sending is treated.
type callKind int

const (
	// idempotent calls (reads, CreateTable) move on to another member.
	idempotent callKind = iota
	// mutation calls fail with ErrOutcomeUnknown.
	mutation
	// stream calls are idempotent reads that may run longer than the call
	// timeout while they deliver (the client bounds each message).
	stream
)

// attempts records what each member answered, for the final error.
type attempts struct {
	order []string
	last  map[string]string
}

func (a *attempts) add(addr string, err error) {
	if a.last == nil {
		a.last = map[string]string{}
	}
	if _, seen := a.last[addr]; !seen {
		a.order = append(a.order, addr)
	}
	a.last[addr] = strings.TrimPrefix(err.Error(), "WAL server "+addr+": ")
}

func (a *attempts) String() string {
	parts := make([]string, 0, len(a.order))
	for _, addr := range a.order {
		parts = append(parts, addr+" ("+a.last[addr]+")")
	}
	return strings.Join(parts, "; ")
}

// run calls fn on members, starting at start, until one gives a verdict.
func (g *GroupClient) run(ctx context.Context, op string, kind callKind, start int, fn func(context.Context, *Client) error) error {
	octx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	var tried attempts
	delay := 50 * time.Millisecond
	for {
		for i := range g.members {
			idx := (start + i) % len(g.members)
			m := g.members[idx]
			cli, err := m.client()
			if err != nil {
				return err
			}
			err = g.attempt(ctx, octx, kind, m, cli, fn)
			if err == nil {
				if kind == mutation {
					g.leader.Store(int64(idx))
				}
				return nil
			}
			if ctx.Err() != nil {
				return err // the caller's own cancellation, reported by the client
			}
			if !retryable(err, kind) {
				return err
			}
			// The next call starts past a member that refused or failed.
			g.leader.CompareAndSwap(int64(idx), int64((idx+1)%len(g.members)))
			if kind == mutation && !errors.Is(err, ErrNotLeader) && !errors.Is(err, errNotSent) {
				return fmt.Errorf("WAL group %s: %s via %s: %w; not sent again, to avoid a duplicate: read the state back before retrying: %w",
					g.name, op, m.addr, ErrOutcomeUnknown, err)
			}
			tried.add(m.addr, err)
			if octx.Err() != nil {
				break
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-octx.Done():
			t.Stop()
			return fmt.Errorf("WAL group %s: %s: no member gave an answer within %s (--command-timeout); tried %s: %w",
				g.name, op, g.timeout, tried.String(), ErrServerUnavailable)
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// share is one member's slice of the call timeout: a member that hangs
// (a SIGSTOPped process whose kernel still accepts connections) must leave
// time to try the others.
func (g *GroupClient) share(n int) time.Duration {
	return max(g.timeout/time.Duration(n+1), 200*time.Millisecond)
}

// attempt calls fn on one member. A read attempt gets the member's share of
// the budget (a stream is bounded per message by the client instead); a
// mutation gets the whole remaining budget: once sent it is never sent
// elsewhere, so cutting it short would only make more outcomes unknown.
func (g *GroupClient) attempt(ctx, octx context.Context, kind callKind, m *groupMember, cli *Client, fn func(context.Context, *Client) error) error {
	switch kind {
	case stream:
		return fn(ctx, cli)
	case idempotent:
		actx, cancel := context.WithTimeout(octx, m.share)
		defer cancel()
		return fn(actx, cli)
	}
	return fn(octx, cli)
}

// retryable reports whether another member may answer where this one could
// not: it is unreachable, not the leader, or has not applied the range.
func retryable(err error, kind callKind) bool {
	return errors.Is(err, errs.ErrUnavailable) || kind != mutation && errors.Is(err, wal.ErrBeyondEnd)
}

func (g *GroupClient) leaderIdx() int { return int(g.leader.Load()) % len(g.members) }
