package walflight

import (
	"context"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/walraft"
)

// Membership actions, served when the server's log is a replica of a
// replicated WAL group (ServerOptions.Replica).
const (
	ActionMembers        = "members"         // {} → []Member
	ActionAddReplica     = "add-replica"     // replicaReq → {}
	ActionRemoveReplica  = "remove-replica"  // replicaReq → {}
	ActionTransferLeader = "transfer-leader" // replicaReq → {}
)

// ErrNotLeader means the replica that answered is not its group's leader;
// the request was refused before it was proposed, so it is safe to send it
// to another member. It is in the ErrUnavailable category.
var ErrNotLeader = fmt.Errorf("not the WAL group's leader: %w", errs.ErrUnavailable)

// ErrNotReplicated means the server is a single-directory WAL, which has no
// members: membership commands need a replicated group.
var ErrNotReplicated = fmt.Errorf("WAL server is not a replica of a replicated group: %w", errs.ErrInvalid)

// ErrUnknownGroup means a WAL group name is not configured (wal.groups).
var ErrUnknownGroup = fmt.Errorf("unknown WAL group: %w", errs.ErrInvalid)

// ErrOutcomeUnknown means a mutation reached a replica and then failed in a
// way that does not tell whether it was committed (a lost connection, the
// deadline, a leader lost after proposing). It is never retried by the
// group client: an append retried blindly could be stored twice. The caller
// reads the state back (the shard's positions) before sending it again. It
// is in the ErrUnavailable category (exit 5).
var ErrOutcomeUnknown = fmt.Errorf("outcome unknown: %w", errs.ErrUnavailable)

// NotLeaderError is a refusal by a follower, carrying what it knows of the
// leader (either may be empty during an election).
type NotLeaderError struct {
	// Server is the client address of the replica that refused.
	Server string
	// LeaderID and LeaderPeer are the leader's replica id and peer address.
	LeaderID, LeaderPeer string
}

// Error says which replica refused and what it knows of the leader.
func (e *NotLeaderError) Error() string {
	leader := "no leader known"
	if e.LeaderID != "" {
		leader = "leader is " + e.LeaderID
	}
	if e.LeaderPeer != "" {
		leader += " at peer address " + e.LeaderPeer
	}
	if e.Server == "" {
		return "not the WAL group's leader (" + leader + ")"
	}
	return fmt.Sprintf("WAL server %s: not the group's leader (%s)", e.Server, leader)
}

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Member is one replica of a group as `walctl wal members` shows it (the
// replica's own description: id, name, peer address, voter, leader,
// applied index, lag).
type Member = walraft.Member

// Replica is the membership surface of a replicated WAL group's replica
// (the Raft node behind a `wal serve`: *walraft.Node). Each method says what it does on a
// follower: AddReplica, RemoveReplica and TransferLeader need the leader and
// fail there with a *NotLeaderError before doing anything.
type Replica interface {
	// ID is this replica's id.
	ID() string
	// Members lists the group's configuration with each member's progress.
	Members(ctx context.Context) ([]Member, error)
	// AddReplica adds id at peerAddr as a non-voter, waits until it has
	// caught up, then promotes it to voter (id "" = the id the replica at
	// peerAddr answers with).
	AddReplica(ctx context.Context, id, peerAddr string) error
	// RemoveReplica removes id from the group.
	RemoveReplica(ctx context.Context, id string) error
	// TransferLeader hands leadership to id ("" = the most caught-up voter).
	TransferLeader(ctx context.Context, id string) error
}

type replicaReq struct {
	ID       string `json:"id,omitempty"`
	PeerAddr string `json:"peer_addr,omitempty"`
}

type emptyResp struct{}

// replicaAction runs a membership action; ok is false for another type.
func replicaAction(ctx context.Context, r Replica, typ string, body []byte) (res any, ok bool, err error) {
	switch typ {
	case ActionMembers, ActionAddReplica, ActionRemoveReplica, ActionTransferLeader:
	default:
		return nil, false, nil
	}
	if r == nil {
		return nil, true, fmt.Errorf("action %s: %w", typ, ErrNotReplicated)
	}
	var req replicaReq
	if err := decodeStrict(body, &req); err != nil {
		return nil, true, err
	}
	switch typ {
	case ActionMembers:
		ms, err := r.Members(ctx)
		if ms == nil {
			ms = []Member{}
		}
		return ms, true, err
	case ActionAddReplica:
		if req.PeerAddr == "" {
			return nil, true, fmt.Errorf("add-replica needs a peer address: %w", errs.ErrInvalid)
		}
		return emptyResp{}, true, r.AddReplica(ctx, req.ID, req.PeerAddr)
	case ActionRemoveReplica:
		if req.ID == "" {
			return nil, true, fmt.Errorf("remove-replica needs an id: %w", errs.ErrInvalid)
		}
		return emptyResp{}, true, r.RemoveReplica(ctx, req.ID)
	}
	return emptyResp{}, true, r.TransferLeader(ctx, req.ID)
}

// asNotLeader finds a not-leader refusal in err.
func asNotLeader(err error) (*NotLeaderError, bool) {
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		return nl, true
	}
	var rl *walraft.NotLeaderError
	if errors.As(err, &rl) {
		return &NotLeaderError{LeaderID: rl.LeaderID, LeaderPeer: rl.LeaderAddr}, true
	}
	return nil, false
}

var _ Replica = (*walraft.Node)(nil)
