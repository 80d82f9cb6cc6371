package walflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/metadata"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// service implements the Flight RPCs on top of a wal.Log.
type service struct {
	flight.BaseFlightServer
	log     wal.Log
	replica Replica
	logger  *slog.Logger
}

// mdRead is the gRPC metadata key by which a group client asks for a
// linearizable read (value readLinearizable): one that reflects every
// command the group committed before it, not only what the answering
// replica has heard of. A read without it is served from the answering
// replica's applied state (`wal members`, a read of one chosen replica).
const (
	mdRead           = "walctl-read"
	readLinearizable = "linearizable"
)

// linearizer is a log whose replicas may lag the group (a replicated WAL's
// replica, *walraft.Node): LinearizableRead confirms leadership and applies
// everything committed before the call, or fails with a not-leader refusal.
// A single-directory WAL is linearizable as it is.
type linearizer interface {
	LinearizableRead(ctx context.Context) error
}

// linearize runs the log's LinearizableRead when the caller asked for it.
func (s *service) linearize(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(mdRead)
	if len(v) == 0 || v[0] != readLinearizable {
		return nil
	}
	if l, ok := s.log.(linearizer); ok {
		return l.LinearizableRead(ctx)
	}
	return nil
}

// fail converts err for the wire, logging what the operator must see on
// the server side too: integrity and I/O failures and unexpected errors.
func (s *service) fail(rpc string, err error) error {
	if errors.Is(err, errs.ErrCorrupt) || errors.Is(err, wal.ErrIO) || !isWalErr(err) && !errors.Is(err, context.Canceled) {
		s.logger.Error("walflight: call failed", "rpc", rpc, "err", err)
	}
	return toStatus(err)
}

// DoPut appends each record batch of the stream to the table and shard named
// by the stream's path descriptor, answering each with a PutResult whose app
// metadata is {"position": N}, in order. A failed append ends the stream with
// its error; the entries answered before it are durable. Each message is
// decoded within a budget of its own size (flightReader): a hostile one is
// refused with InvalidArgument, and the server and its other streams go on.
func (s *service) DoPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	return readPut(ctx, stream.Recv, arrowcheck.NewAllocator(0), func(table string, shard int, rec arrow.RecordBatch) error {
		// Batches are validated in full by the engine's Append (DESIGN.md rule 17).
		pos, err := s.log.Append(ctx, table, shard, rec)
		if err != nil {
			return s.fail("DoPut", err)
		}
		meta, _ := json.Marshal(posMeta{Position: pos})
		return stream.Send(&flight.PutResult{AppMetadata: meta})
	})
}

// readErr classifies a failure to read an incoming Arrow stream: the
// caller's cancellation, or malformed input.
func readErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("malformed Arrow stream: %v: %w", err, errs.ErrInvalid)
}

// DoGet streams the entries named by a JSON readTicket, each record batch
// carrying app metadata {"position": N}.
func (s *service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	var req readTicket
	if err := decodeStrict(tkt.GetTicket(), &req); err != nil {
		return toStatus(err)
	}
	if err := s.linearize(ctx); err != nil {
		return s.fail("DoGet", err)
	}
	info, err := s.log.Table(ctx, req.Table)
	if err != nil {
		return toStatus(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(info.Schema))
	err = s.log.Read(ctx, req.Table, req.Shard, req.From, req.To, func(e wal.Entry) error {
		meta, _ := json.Marshal(posMeta{Position: e.Position})
		return w.WriteWithAppMetadata(e.Record, meta)
	})
	if err != nil {
		w.Close()
		return s.fail("DoGet", err)
	}
	return w.Close() // sends the schema even when no entry matched
}

// DoAction runs one of the Action* requests and sends one JSON result.
func (s *service) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	res, err := s.action(stream.Context(), a.GetType(), a.GetBody())
	if err != nil {
		return s.fail(a.GetType(), err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&flight.Result{Body: b})
}

// ListActions lists the supported action types.
func (s *service) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, t := range []string{ActionCreateTable, ActionTable, ActionTables, ActionSeal, ActionGenerations,
		ActionEpoch, ActionAdvanceEpoch, ActionTrim, ActionStats,
		ActionMembers, ActionAddReplica, ActionRemoveReplica, ActionTransferLeader} {
		if err := stream.Send(&flight.ActionType{Type: t}); err != nil {
			return err
		}
	}
	return nil
}

func (s *service) action(ctx context.Context, typ string, body []byte) (any, error) {
	if len(body) == 0 {
		body = []byte("{}")
	}
	if res, ok, err := replicaAction(ctx, s.replica, typ, body); ok {
		return res, err
	}
	if err := s.linearize(ctx); err != nil {
		return nil, err
	}
	if typ == ActionTables {
		return s.tables(ctx, body)
	}
	switch typ {
	case ActionCreateTable:
		return s.createTable(ctx, body)
	case ActionTable:
		var r tableReq
		if err := decodeStrict(body, &r); err != nil {
			return nil, err
		}
		info, err := s.log.Table(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		return toWire(info)
	case ActionSeal, ActionGenerations:
		var r shardReq
		if err := decodeStrict(body, &r); err != nil {
			return nil, err
		}
		if typ == ActionSeal {
			return s.log.Seal(ctx, r.Table, r.Shard)
		}
		gens, err := s.log.Generations(ctx, r.Table, r.Shard)
		if gens == nil {
			gens = []wal.Generation{}
		}
		return gens, err
	case ActionEpoch:
		var r tableReq
		if err := decodeStrict(body, &r); err != nil {
			return nil, err
		}
		e, err := s.log.Epoch(ctx, r.Name)
		return epochResp{Epoch: e}, err
	case ActionAdvanceEpoch:
		var r advanceReq
		if err := decodeStrict(body, &r); err != nil {
			return nil, err
		}
		e, err := s.log.AdvanceEpoch(ctx, r.Table, r.Expect)
		return epochResp{Epoch: e}, err
	case ActionTrim:
		var r trimReq
		if err := decodeStrict(body, &r); err != nil {
			return nil, err
		}
		tt, err := s.log.Trim(ctx, r.Table, r.Shard, r.Through, r.Epoch)
		return trimResp{TrimmedThrough: tt}, err
	case ActionStats:
		var r statsReq
		if err := decodeStrict(body, &r); err != nil {
			return nil, err
		}
		return s.log.Stats(ctx, r.Table, r.Watermarks)
	}
	return nil, fmt.Errorf("unknown action %q: %w", typ, errs.ErrInvalid)
}

func (s *service) createTable(ctx context.Context, body []byte) (any, error) {
	var r createTableReq
	if err := decodeStrict(body, &r); err != nil {
		return nil, err
	}
	schema, err := wal.DecodeSchema(r.Schema)
	if err != nil {
		return nil, err
	}
	info, err := s.log.CreateTable(ctx, r.Name, schema, r.Shards)
	if err != nil {
		return nil, err
	}
	return toWire(info)
}

func (s *service) tables(ctx context.Context, body []byte) (any, error) {
	var r struct{}
	if err := decodeStrict(body, &r); err != nil {
		return nil, err
	}
	infos, err := s.log.Tables(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]tableWire, 0, len(infos))
	for _, info := range infos {
		w, err := toWire(info)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}
