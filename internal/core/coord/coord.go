// Package coord is walctl's etcd coordination core (DESIGN.md §2 "claim",
// §3 rules 1–3 and 14): claims on tables, each bound to an etcd lease of its
// own; the local busy hint consulted before any claim attempt; operator
// inspection and audited revocation.
//
// It follows etcd's own client/v3/concurrency: a Claim is a Session and a
// Mutex in one. It owns one lease, drains keep-alives in one goroutine and
// exposes Done; ownership is taken by
//
//	Txn(If(CreateRevision(k) == 0).Then(Put(k, v, WithLease(l))))
//
// and the winner's CreateRevision is the claim's identity. Mutations made by
// the holder carry Claim.IsOwner into their own transactions.
//
// Key layout under Config.Prefix (default /walctl/v1):
//
//	<prefix>/claims/<table>          claim record, attached to the claim's lease
//	<prefix>/reservations/<table>    catch-up reservation (written by the master)
//	<prefix>/audit/<time>-<table>    operator actions (revocations)
//
// Every etcd call carries a deadline derived from the caller's context and
// Config.CallTimeout. An etcd that does not answer in time yields an error
// wrapping errs.ErrUnavailable that names the endpoints; a cancelled caller
// context yields the context's error.
package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Defaults for Config fields left zero.
const (
	DefaultPrefix      = "/walctl/v1"
	DefaultDialTimeout = 5 * time.Second
	DefaultCallTimeout = 5 * time.Second
	DefaultClaimTTL    = 15 * time.Second
)

// Config is the typed configuration of a Client.
type Config struct {
	// Endpoints are the etcd client URLs (Connect only).
	Endpoints []string
	// DialTimeout bounds dialing and the reachability check of Connect.
	DialTimeout time.Duration
	// CallTimeout bounds every single etcd call (default 5s).
	CallTimeout time.Duration
	// Prefix is the root of walctl's keys (default /walctl/v1).
	Prefix string
	// ClaimTTL is the lease TTL of new claims (default 15s). etcd rounds it
	// up to whole seconds and to its own minimum (about 2s).
	ClaimTTL time.Duration
	// Clock drives the wall-time expiry rule, keep-alive pacing and slice
	// policies (default the real clock).
	Clock clock.Clock
}

// Client is walctl's view of etcd for claims. It is safe for concurrent use.
type Client struct {
	cli         *clientv3.Client
	ownsCli     bool
	endpoints   []string
	prefix      string
	callTimeout time.Duration
	claimTTL    time.Duration
	clock       clock.Clock

	mu   sync.Mutex
	hint *Hint
}

// New wraps an existing etcd client; Config.Endpoints and DialTimeout are
// ignored. Close does not close cli.
func New(cli *clientv3.Client, cfg Config) (*Client, error) {
	prefix := strings.TrimRight(cfg.Prefix, "/")
	if cfg.Prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasPrefix(prefix, "/") {
		return nil, fmt.Errorf("etcd key prefix %q must start with '/': %w", cfg.Prefix, errs.ErrInvalid)
	}
	c := &Client{
		cli:         cli,
		endpoints:   cli.Endpoints(),
		prefix:      prefix,
		callTimeout: orDefault(cfg.CallTimeout, DefaultCallTimeout),
		claimTTL:    orDefault(cfg.ClaimTTL, DefaultClaimTTL),
		clock:       cfg.Clock,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c, nil
}

// Connect dials etcd and checks that it answers within DialTimeout (a
// serializable read of one key), so a command fails early and clearly. On
// failure or cancellation nothing is left open; the error wraps
// errs.ErrUnavailable and names the endpoints, or carries ctx's error.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("no etcd endpoints: %w", errs.ErrInvalid)
	}
	dial := orDefault(cfg.DialTimeout, DefaultDialTimeout)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: dial,
		Context:     context.WithoutCancel(ctx),
		// Without a logger clientv3 builds a zap production logger that
		// writes warnings to stderr; the command layer owns stderr.
		Logger: nopLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %v: %w", cfg.Endpoints, err, errs.ErrUnavailable)
	}
	c, err := New(cli, cfg)
	if err != nil {
		cli.Close()
		return nil, err
	}
	c.ownsCli = true
	if err := c.Probe(ctx, dial); err != nil {
		cli.Close()
		return nil, err
	}
	return c, nil
}

// Probe checks that etcd answers within d (a serializable count of one
// key: no quorum round, nothing written), so that a command fails early
// and clearly instead of every later call waiting out its own deadline on
// a dead endpoint (the etcd client does not fail fast: its calls wait for
// a connection until their deadline). The error wraps errs.ErrUnavailable
// and names the endpoints, or carries ctx's cause when ctx ended first.
func (c *Client) Probe(ctx context.Context, d time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := c.cli.Get(pctx, c.prefix+"/", clientv3.WithSerializable(), clientv3.WithCountOnly())
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("connect to etcd %v: %w", c.endpoints, context.Cause(ctx))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("etcd %v: not reachable within %s (is it running? check --etcd-endpoints): %w", c.endpoints, d, errs.ErrUnavailable)
	}
	return fmt.Errorf("etcd %v: not reachable within %s: %v: %w", c.endpoints, d, err, errs.ErrUnavailable)
}

// Close stops the busy hint and, when the Client was made by Connect, closes
// the etcd client. Claims are not released: release them first.
func (c *Client) Close() error {
	c.mu.Lock()
	h := c.hint
	c.hint = nil
	c.mu.Unlock()
	if h != nil {
		h.Close()
	}
	if c.ownsCli {
		return c.cli.Close()
	}
	return nil
}

// Etcd returns the underlying etcd client, for transactions that carry
// Claim.IsOwner.
func (c *Client) Etcd() *clientv3.Client { return c.cli }

// Endpoints returns the etcd endpoints, as named in errors.
func (c *Client) Endpoints() []string { return c.endpoints }

// Prefix returns the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// ClaimKey returns the etcd key of table's claim.
func (c *Client) ClaimKey(table string) string { return c.prefix + "/claims/" + table }

// ReservationKey returns the etcd key of table's catch-up reservation.
func (c *Client) ReservationKey(table string) string { return c.prefix + "/reservations/" + table }

func (c *Client) claimsDir() string       { return c.prefix + "/claims/" }
func (c *Client) reservationsDir() string { return c.prefix + "/reservations/" }
func (c *Client) auditDir() string        { return c.prefix + "/audit/" }

// auditKey is the key of an audit record of an action on table at now:
// audit records sort by time.
func (c *Client) auditKey(now time.Time, table string) string {
	return c.auditDir() + now.Format("20060102T150405.000000000Z") + "-" + table
}

// callCtx derives the per-call deadline.
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.callTimeout)
}

// ValidateTable checks a table name by the WAL's rule (wal.ValidateName):
// 1 to 128 bytes of [A-Za-z0-9_-], not starting with '-', so it is safe as
// one etcd key segment and one path element. The error wraps errs.ErrInvalid.
func ValidateTable(name string) error { return wal.ValidateName(name) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// since is the time elapsed since t by the larger of the monotonic and the
// wall clock. The monotonic clock stops while a VM is suspended, but etcd's
// leases run on: after a resume a holder must not believe a lease fresh
// that etcd has expired (rule 1). A wall clock stepped back is covered by
// the monotonic reading.
func (c *Client) since(t time.Time) time.Duration {
	return max(c.clock.Since(t), c.clock.Now().Round(0).Sub(t.Round(0)))
}
