// Package walflight serves a wal.Log over Arrow Flight and provides the
// client that the rest of walctl uses to reach a remote WAL (`--wal ADDR`).
// The client satisfies wal.Log, so code does not care whether it holds the
// in-process engine or a server.
//
// # Protocol
//
//   - DoPut appends. The stream's FlightDescriptor is a PATH
//     descriptor [table, shard]; each record batch becomes one entry and is
//     answered, once durable, by a PutResult whose app metadata is
//     {"position": N}.
//   - DoGet reads. The ticket is JSON {"table", "shard", "from", "to"}
//     (to 0 = last durable position); each record batch carries app metadata
//     {"position": N}.
//   - DoAction runs the other operations (the Action* constants) with JSON
//     bodies; unknown fields are refused. Schemas travel as Arrow IPC schema
//     messages (wal.EncodeSchema).
//   - A read (DoGet, or an action that reads) carrying the gRPC metadata
//     "walctl-read: linearizable" is served by a replicated group's leader
//     after a raft barrier and refused by a follower (not the leader); a
//     single-directory server ignores it (it is linearizable as it is).
//
// Errors travel as gRPC status codes derived from the errs category, with a
// google.rpc.ErrorInfo (domain "walctl.wal") naming the sentinel, so that
// errors.Is(err, wal.ErrEpochConflict) and friends hold on the client, and
// an *wal.EpochConflictError carries the server's current epoch. Transport
// failures wrap ErrServerUnavailable (errs.ErrUnavailable).
//
// # Deadlines
//
// Every client call is bounded by ClientOptions.CallTimeout
// (`--command-timeout`): a unary call as a whole, a streaming read per
// message, so that a hung server never pins its caller (or the claim the
// caller holds) for ever. Running out of it is ErrServerUnavailable; a
// caller's own cancellation is reported with its cause.
//
// # Security
//
// TLS is enabled by giving the server a certificate and key; a bearer token
// ("authorization: Bearer <token>" metadata) is checked on every call when
// configured, and refused with codes.Unauthenticated (ErrUnauthenticated on
// the client).
package walflight
