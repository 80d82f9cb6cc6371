package walraft

import (
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
)

var (
	// ErrNotLeader marks a mutation refused because this replica is not the
	// group's leader. It is always returned before the command entered the
	// raft log, so retrying it on the leader is safe. It wraps
	// errs.ErrUnavailable (exit 5) for callers that do not follow leaders.
	ErrNotLeader = fmt.Errorf("not the group's leader: %w", errs.ErrUnavailable)
	// ErrOutcomeUnknown marks a mutation that entered the raft log but whose
	// commit this replica could not confirm (leadership lost, shutdown,
	// cancellation after proposal). It may or may not take effect; it is
	// never retried blindly (wal.Log: resolve by reading the state back).
	ErrOutcomeUnknown = fmt.Errorf("outcome unknown (the command was proposed; it may or may not be committed): %w", errs.ErrUnavailable)
	// ErrBehind marks a read refused because this replica has not applied
	// everything the group has committed (or has not joined a group yet):
	// it never serves partial data.
	ErrBehind = fmt.Errorf("replica has not caught up with the group: %w", errs.ErrUnavailable)
	// ErrIdentity marks a replica directory whose identity does not match
	// the configuration (another group, another name) or is unreadable.
	ErrIdentity = fmt.Errorf("replica identity mismatch: %w", errs.ErrInvalid)
	// ErrRefused marks a peer connection refused by the handshake: a
	// different group, or different deterministic engine settings.
	ErrRefused = fmt.Errorf("peer refused: %w", errs.ErrInvalid)
	// ErrOldRaftLog marks a replica directory whose raft log was written by
	// an older walctl (hashicorp/raft-wal, then bbolt, before the segment
	// log store): it is not read and never silently replaced by an empty
	// log. Rebuild the replica: wipe its directory and add it back (wal
	// add-replica).
	ErrOldRaftLog = fmt.Errorf("replica directory holds a raft log from an older walctl (rebuild the replica: empty its directory, then wal add-replica): %w", errs.ErrInvalid)
)

// NotLeaderError is a mutation refused before proposal by a replica that is
// not the leader. LeaderID and LeaderAddr (peer address) name the leader this
// replica knows of; both are empty while no leader is known.
type NotLeaderError struct {
	ID         string
	LeaderID   string
	LeaderAddr string
}

// Error names this replica and the leader it knows of.
func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return fmt.Sprintf("replica %s is not the leader and knows no leader (election in progress or no quorum)", e.ID)
	}
	return fmt.Sprintf("replica %s is not the leader; leader is %s at %s", e.ID, e.LeaderID, e.LeaderAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// IsPreProposal reports whether err proves the command never entered the
// raft log (safe to retry anywhere).
func IsPreProposal(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNotProposed)
}
