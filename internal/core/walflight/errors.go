package walflight

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// errorDomain marks the ErrorInfo details walctl puts on its gRPC statuses.
const errorDomain = "walctl.wal"

// ErrUnauthenticated is returned when the server refuses the bearer token
// (missing or wrong). It is in the ErrInvalid category: the caller's
// configuration is wrong, retrying will not help.
var ErrUnauthenticated = fmt.Errorf("WAL server refused the bearer token: %w", errs.ErrInvalid)

// sentinels maps ErrorInfo reasons to the errors they stand for, most
// specific first: toStatus picks the first that matches.
var sentinels = []struct {
	reason string
	err    error
}{
	{"EPOCH_CONFLICT", wal.ErrEpochConflict},
	{"NOT_LEADER", ErrNotLeader},
	{"NOT_REPLICATED", ErrNotReplicated},
	{"STALE_EPOCH", wal.ErrStaleEpoch},
	{"UNKNOWN_TABLE", wal.ErrUnknownTable},
	{"TRIMMED", wal.ErrTrimmed},
	{"BEYOND_END", wal.ErrBeyondEnd},
	{"BAD_NAME", wal.ErrBadName},
	{"BAD_SHARD", wal.ErrBadShard},
	{"BAD_RANGE", wal.ErrBadRange},
	{"SCHEMA_MISMATCH", wal.ErrSchemaMismatch},
	{"MALFORMED_BATCH", arrowcheck.ErrMalformed},
	{"BATCH_SCHEMA", arrowcheck.ErrSchema},
	{"BAD_SCHEMA", arrowcheck.ErrBadSchema},
	{"TABLE_CONFLICT", wal.ErrTableConflict},
	{"CORRUPT_ENTRY", wal.ErrCorruptEntry},
	{"CLOSED", wal.ErrClosed},
	{"IO", wal.ErrIO},
	{"LOCKED", dirlock.ErrLocked},
	{"INVALID", errs.ErrInvalid},
	{"NOT_FOUND", errs.ErrNotFound},
	{"CONFLICT", errs.ErrConflict},
	{"FENCED", errs.ErrFenced},
	{"UNAVAILABLE", errs.ErrUnavailable},
	{"CORRUPT", errs.ErrCorrupt},
}

// toStatus converts an error from a wal.Log into a gRPC status whose code
// follows the error's category and whose ErrorInfo names the sentinel.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isWalErr(err) {
		return err
	}
	if nl, ok := asNotLeader(err); ok {
		st, _ := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.ErrorInfo{Domain: errorDomain,
			Reason: "NOT_LEADER", Metadata: map[string]string{"leader_id": nl.LeaderID, "leader_peer": nl.LeaderPeer}})
		return st.Err()
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, errs.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, errs.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, errs.ErrConflict):
		code = codes.Aborted
	case errors.Is(err, errs.ErrFenced):
		code = codes.FailedPrecondition
	case errors.Is(err, errs.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, errs.ErrCorrupt):
		code = codes.DataLoss
	}
	st := status.New(code, err.Error())
	for _, s := range sentinels {
		if !errors.Is(err, s.err) {
			continue
		}
		info := &errdetails.ErrorInfo{Domain: errorDomain, Reason: s.reason}
		var ce *wal.EpochConflictError
		if errors.As(err, &ce) {
			info.Metadata = map[string]string{"table": ce.Table,
				"expect": strconv.FormatUint(ce.Expect, 10), "current": strconv.FormatUint(ce.Current, 10)}
		}
		if d, derr := st.WithDetails(info); derr == nil {
			st = d
		}
		break
	}
	return st.Err()
}

func isWalErr(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return true
		}
	}
	return false
}

// remoteError is an error returned by a WAL server, unwrapping to the
// sentinel (and thereby the category) the server reported.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

// fromStatus converts an RPC failure back into an error wrapping the same
// sentinel as on the server. Transport failures wrap ErrServerUnavailable;
// a call whose ctx ended reports ctx's cause (Client.fromStatus tells the
// caller's cancellation from the call's own deadline before this).
func fromStatus(ctx context.Context, addr string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("WAL server %s: %w: %w", addr, context.Cause(ctx), ErrServerUnavailable)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("WAL server %s: %v: %w", addr, err, ErrServerUnavailable)
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		if info.Reason == "NOT_LEADER" {
			return &NotLeaderError{Server: addr, LeaderID: info.Metadata["leader_id"], LeaderPeer: info.Metadata["leader_peer"]}
		}
		if info.Reason == "EPOCH_CONFLICT" {
			expect, _ := strconv.ParseUint(info.Metadata["expect"], 10, 64)
			current, _ := strconv.ParseUint(info.Metadata["current"], 10, 64)
			return &wal.EpochConflictError{Table: info.Metadata["table"], Expect: expect, Current: current}
		}
		for _, s := range sentinels {
			if s.reason == info.Reason {
				return &remoteError{msg: "WAL server " + addr + ": " + st.Message(), err: s.err}
			}
		}
	}
	var cat error
	switch st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		cat = ErrUnauthenticated
	case codes.InvalidArgument:
		cat = errs.ErrInvalid
	case codes.NotFound:
		cat = errs.ErrNotFound
	case codes.Aborted, codes.AlreadyExists:
		cat = errs.ErrConflict
	case codes.FailedPrecondition:
		cat = errs.ErrFenced
	case codes.DataLoss:
		cat = errs.ErrCorrupt
	default:
		cat = ErrServerUnavailable
	}
	return &remoteError{msg: fmt.Sprintf("WAL server %s: %s (%s)", addr, st.Message(), st.Code()), err: cat}
}
