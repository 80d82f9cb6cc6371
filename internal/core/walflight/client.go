package walflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// ClientOptions configure Dial.
type ClientOptions struct {
	// Conns is the number of gRPC connections in the pool (calls are spread
	// round-robin); default 4.
	Conns int
	// Token is sent as "authorization: Bearer <Token>" on every call.
	Token string
	// TLS enables TLS. CAFile, when set, is the PEM bundle that verifies the
	// server (otherwise the system roots); ServerName overrides the name
	// checked in the server's certificate.
	TLS        bool
	CAFile     string
	ServerName string
	// MaxMessageBytes bounds one message in both directions; default
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// CallTimeout bounds every call (`--command-timeout`, DESIGN.md §3 rule
	// 1): the whole of a unary call (actions, Append), and for a streaming
	// Read the wait for each next message, so a long healthy read is not cut
	// but a stalled one is. A call that runs out of it fails with
	// ErrServerUnavailable. Default DefaultCallTimeout.
	CallTimeout time.Duration
}

// DefaultCallTimeout is ClientOptions.CallTimeout when left zero.
const DefaultCallTimeout = 30 * time.Second

// Client is a wal.Log backed by a WAL server. It is safe for concurrent use.
type Client struct {
	addr    string
	timeout time.Duration
	conns   []*grpc.ClientConn
	fl      []flight.FlightServiceClient
	next    atomic.Uint64
	closed  atomic.Bool
	once    sync.Once
	// sendReady makes every call wait for its connection to be ready before
	// sending anything, failing with errNotSent otherwise (group clients:
	// a request never sent may go to another member).
	sendReady bool
	// connectTimeout bounds the wait for a ready connection (default the
	// call timeout): a group gives each member a share of its budget.
	connectTimeout time.Duration
}

var _ wal.Log = (*Client)(nil)

// Dial connects a pool of opts.Conns connections to the WAL server at addr
// and checks, within ctx, that the server answers and accepts the token. A
// refused token is ErrUnauthenticated; an unreachable server wraps
// errs.ErrUnavailable.
func Dial(ctx context.Context, addr string, opts ClientOptions) (*Client, error) {
	c, err := newClient(addr, opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.Tables(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func dialOptions(opts ClientOptions) ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if opts.TLS {
		var err error
		if opts.CAFile != "" {
			creds, err = credentials.NewClientTLSFromFile(opts.CAFile, opts.ServerName)
			if err != nil {
				return nil, fmt.Errorf("load CA file %s: %v: %w", opts.CAFile, err, errs.ErrInvalid)
			}
		} else {
			creds = credentials.NewClientTLSFromCert(nil, opts.ServerName)
		}
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxMessageBytes), grpc.MaxCallSendMsgSize(opts.MaxMessageBytes)),
	}
	if opts.Token != "" {
		md := []string{"authorization", "Bearer " + opts.Token}
		dopts = append(dopts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return inv(metadata.AppendToOutgoingContext(ctx, md...), m, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, d *grpc.StreamDesc, cc *grpc.ClientConn, m string, s grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return s(metadata.AppendToOutgoingContext(ctx, md...), d, cc, m, o...)
			}))
	}
	return dopts, nil
}

// newClient builds the pool without contacting the server (gRPC connects
// lazily, on the first call).
func newClient(addr string, opts ClientOptions, extra ...grpc.DialOption) (*Client, error) {
	if opts.Conns <= 0 {
		opts.Conns = 4
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	dopts, err := dialOptions(opts)
	if err != nil {
		return nil, err
	}
	dopts = append(dopts, extra...)
	c := &Client{addr: addr, timeout: opts.CallTimeout}
	for i := 0; i < opts.Conns; i++ {
		cc, err := grpc.NewClient(addr, dopts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("WAL server %s: %v: %w", addr, err, errs.ErrInvalid)
		}
		c.conns = append(c.conns, cc)
		c.fl = append(c.fl, flight.NewFlightServiceClient(cc))
	}
	return c, nil
}

// Addr is the server address the client was dialled with.
func (c *Client) Addr() string { return c.addr }

func (c *Client) pick(ctx context.Context) (flight.FlightServiceClient, error) {
	if c.closed.Load() {
		return nil, wal.ErrClosed
	}
	i := c.next.Add(1) % uint64(len(c.fl))
	if c.sendReady {
		if err := c.waitReady(ctx, c.conns[i]); err != nil {
			return nil, err
		}
	}
	return c.fl[i], nil
}

// Close closes the pool's connections; in-flight calls fail with an
// ErrUnavailable error. It is safe to call more than once.
func (c *Client) Close() error {
	var first error
	c.once.Do(func() {
		c.closed.Store(true)
		for _, cc := range c.conns {
			if err := cc.Close(); err != nil && first == nil {
				first = err
			}
		}
	})
	return first
}

// do runs one action and decodes its single result into out.
func (c *Client) do(ctx context.Context, typ string, req, out any) error {
	fl, err := c.pick(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	stream, err := fl.DoAction(cctx, &flight.Action{Type: typ, Body: body})
	if err != nil {
		return c.fromStatus(ctx, cctx, "action "+typ, err)
	}
	res, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("WAL server %s: action %s returned no result: %w", c.addr, typ, ErrServerUnavailable)
		}
		return c.fromStatus(ctx, cctx, "action "+typ, err)
	}
	if err := json.Unmarshal(res.GetBody(), out); err != nil {
		return fmt.Errorf("WAL server %s: action %s: undecodable result: %v: %w", c.addr, typ, err, ErrServerUnavailable)
	}
	return nil
}

// CreateTable implements wal.Log over the wire; see wal.Log for semantics.
// An ambiguous failure (ErrUnavailable) is resolved by calling it again.
func (c *Client) CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (wal.TableInfo, error) {
	if err := wal.ValidateName(name); err != nil {
		return wal.TableInfo{}, err
	}
	sb, err := wal.EncodeSchema(schema)
	if err != nil {
		return wal.TableInfo{}, fmt.Errorf("table %q: %v: %w", name, err, wal.ErrSchemaMismatch)
	}
	var w tableWire
	if err := c.do(ctx, ActionCreateTable, createTableReq{Name: name, Shards: shards, Schema: sb}, &w); err != nil {
		return wal.TableInfo{}, err
	}
	return fromWire(w)
}

// Table implements wal.Log.
func (c *Client) Table(ctx context.Context, name string) (wal.TableInfo, error) {
	var w tableWire
	if err := c.do(ctx, ActionTable, tableReq{Name: name}, &w); err != nil {
		return wal.TableInfo{}, err
	}
	return fromWire(w)
}

// Tables implements wal.Log.
func (c *Client) Tables(ctx context.Context) ([]wal.TableInfo, error) {
	var ws []tableWire
	if err := c.do(ctx, ActionTables, struct{}{}, &ws); err != nil {
		return nil, err
	}
	out := make([]wal.TableInfo, 0, len(ws))
	for _, w := range ws {
		info, err := fromWire(w)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Seal implements wal.Log. A failure after the request was sent may have
// sealed: Generations tells.
func (c *Client) Seal(ctx context.Context, table string, shard int) (wal.Generation, error) {
	var g wal.Generation
	err := c.do(ctx, ActionSeal, shardReq{Table: table, Shard: shard}, &g)
	return g, err
}

// Generations implements wal.Log.
func (c *Client) Generations(ctx context.Context, table string, shard int) ([]wal.Generation, error) {
	var gs []wal.Generation
	err := c.do(ctx, ActionGenerations, shardReq{Table: table, Shard: shard}, &gs)
	return gs, err
}

// Epoch implements wal.Log.
func (c *Client) Epoch(ctx context.Context, table string) (uint64, error) {
	var r epochResp
	err := c.do(ctx, ActionEpoch, tableReq{Name: table}, &r)
	return r.Epoch, err
}

// AdvanceEpoch implements wal.Log. A conflict is an *wal.EpochConflictError
// carrying the server's current epoch. A failure wrapping ErrUnavailable is
// ambiguous (the swap may have happened): resolve it with Epoch.
func (c *Client) AdvanceEpoch(ctx context.Context, table string, expect uint64) (uint64, error) {
	var r epochResp
	err := c.do(ctx, ActionAdvanceEpoch, advanceReq{Table: table, Expect: expect}, &r)
	return r.Epoch, err
}

// Trim implements wal.Log. A failure wrapping ErrUnavailable is ambiguous:
// Stats reports the trimmed-through position.
func (c *Client) Trim(ctx context.Context, table string, shard int, through, epoch uint64) (uint64, error) {
	var r trimResp
	err := c.do(ctx, ActionTrim, trimReq{Table: table, Shard: shard, Through: through, Epoch: epoch}, &r)
	return r.TrimmedThrough, err
}

// Stats implements wal.Log.
func (c *Client) Stats(ctx context.Context, table string, watermarks map[int]uint64) (wal.TableStats, error) {
	var st wal.TableStats
	err := c.do(ctx, ActionStats, statsReq{Table: table, Watermarks: watermarks}, &st)
	return st, err
}

// Append implements wal.Log with one DoPut stream per call. If the call
// fails after the record was sent (ErrUnavailable, including a cancelled
// ctx), the entry may or may not have been appended; it is never partly
// visible.
func (c *Client) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	fl, err := c.pick(ctx)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		return 0, fmt.Errorf("nil record batch: %w", wal.ErrSchemaMismatch)
	}
	// The server validates against the table schema; checking the batch
	// against its own schema here keeps a batch the IPC writer cannot
	// encode from leaving a half-sent stream (which waited for the deadline
	// and reported the server unavailable).
	if err := arrowcheck.Batch(rec.Schema(), rec); err != nil {
		return 0, fmt.Errorf("table %q: %w", table, err)
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	stream, err := fl.DoPut(cctx)
	if err != nil {
		return 0, c.fromStatus(ctx, cctx, "append", err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(putDescriptor(table, shard))
	werr := w.Write(rec)
	if werr == nil {
		werr = w.Close()
	}
	if werr == nil {
		werr = stream.CloseSend()
	}
	// A send error is usually the server ending the stream: its status
	// comes from Recv.
	res, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			if werr != nil {
				return 0, c.fromStatus(ctx, cctx, "append", werr)
			}
			return 0, fmt.Errorf("WAL server %s: append returned no position: %w", c.addr, ErrServerUnavailable)
		}
		return 0, c.fromStatus(ctx, cctx, "append", err)
	}
	var m posMeta
	if err := json.Unmarshal(res.GetAppMetadata(), &m); err != nil || m.Position == 0 {
		return 0, fmt.Errorf("WAL server %s: append answered %q: %w", c.addr, res.GetAppMetadata(), ErrServerUnavailable)
	}
	return m.Position, nil
}

// Read implements wal.Log with one DoGet stream. Entry.Raw is nil. An error
// from fn cancels the stream and is returned as is. The server must deliver
// each next entry within CallTimeout (time spent in fn does not count), else
// the read fails with ErrServerUnavailable.
func (c *Client) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	fl, err := c.pick(ctx)
	if err != nil {
		return err
	}
	tkt, err := json.Marshal(readTicket{Table: table, Shard: shard, From: from, To: to})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(c.timeout, func() { cancel(errIdle) })
	defer idle.stop()
	fail := func(err error) error {
		if errors.Is(context.Cause(sctx), errIdle) {
			return c.noAnswer("read", fmt.Sprintf("no entry within %s", c.timeout))
		}
		return c.fromStatus(ctx, sctx, "read", err)
	}
	stream, err := fl.DoGet(sctx, &flight.Ticket{Ticket: tkt})
	if err != nil {
		return fail(err)
	}
	rdr, err := newFlightReader(stream.Recv, arrowcheck.NewAllocator(0)) // each answer decoded within a budget of its size
	if err != nil {
		return fail(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		idle.pause()
		var m posMeta
		if err := json.Unmarshal(rdr.appMetadata(), &m); err != nil || m.Position == 0 {
			return fmt.Errorf("WAL server %s: read: entry without a position: %w", c.addr, ErrServerUnavailable)
		}
		if err := fn(wal.Entry{Position: m.Position, Record: rdr.RecordBatch()}); err != nil {
			return err
		}
		idle.resume()
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	return nil
}
