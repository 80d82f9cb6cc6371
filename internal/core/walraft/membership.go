package walraft

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// ErrAddressInUse marks an AddReplica whose address is held by another
// replica id in the group (typically the old id of a wiped replica).
var ErrAddressInUse = fmt.Errorf("peer address held by another replica: %w", errs.ErrConflict)

// ErrUnknownMember marks a replica id that is not in the group.
var ErrUnknownMember = fmt.Errorf("no such replica in the group: %w", errs.ErrNotFound)

// AddReplica adds the replica at peerAddr (id "" = ask it for its id) as a
// non-voter, waits until it has applied everything the leader had logged
// when it was added, then promotes it to voter. Leader only. Cancelled
// while waiting, the replica stays a non-voter (it keeps catching up; run
// AddReplica again to promote it). Adding a voter again does nothing.
func (n *Node) AddReplica(ctx context.Context, id, peerAddr string) error {
	if err := n.leaderOnly(); err != nil {
		return err
	}
	st, err := QueryStatus(ctx, peerAddr, n.cfg.Group, n.cfg.PeerTLS)
	if err != nil {
		return fmt.Errorf("add replica at %s: %w", peerAddr, err)
	}
	if st.GenBytes != n.cfg.Engine.MaxGenerationBytes {
		return fmt.Errorf("add replica at %s: it seals generations at %d bytes, the group at %d (must be equal): %w", peerAddr, st.GenBytes, n.cfg.Engine.MaxGenerationBytes, ErrRefused)
	}
	if id == "" {
		id = st.ID
	} else if st.ID != id {
		return fmt.Errorf("add replica %s: %s answers as %s: %w", id, peerAddr, st.ID, errs.ErrConflict)
	}
	if s, ok, err := n.server(id); err != nil {
		return err
	} else if ok && s.Suffrage == raft.Voter {
		return nil
	}
	if holder, err := n.addressHolder(peerAddr); err != nil {
		return err
	} else if holder != "" && holder != id {
		return fmt.Errorf("add replica %s: address %s belongs to replica %s in the group (a wiped or replaced replica): remove it first: %w", id, peerAddr, holder, ErrAddressInUse)
	}
	if err := n.raft.AddNonvoter(raft.ServerID(id), raftAddr(id, peerAddr), 0, timeoutOf(ctx)).Error(); err != nil {
		return n.membershipErr("add non-voter "+id, err)
	}
	if err := n.waitCaughtUp(ctx, peerAddr, n.raft.LastIndex()); err != nil {
		return fmt.Errorf("replica %s joined as non-voter but is not promoted: %w", id, err)
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raftAddr(id, peerAddr), 0, timeoutOf(ctx)).Error(); err != nil {
		return n.membershipErr("promote "+id, err)
	}
	n.log.Info("walraft: replica promoted to voter", "id", id, "peer_addr", peerAddr)
	return nil
}

func (n *Node) waitCaughtUp(ctx context.Context, peerAddr string, target uint64) error {
	// Polls the replica's status on the real clock: this waits for a
	// remote replica, not for a timed policy (Config.Clock drives those).
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := QueryStatus(ctx, peerAddr, n.cfg.Group, n.cfg.PeerTLS)
		if err == nil && st.AppliedIndex >= target {
			return nil
		}
		if err := n.leaderOnly(); err != nil {
			return err
		}
		select {
		case <-n.stop:
			return fmt.Errorf("replica closed while waiting for %s to catch up: %w", peerAddr, errs.ErrUnavailable)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to apply raft index %d (status %+v, %v): %w", peerAddr, target, st, err, errs.ErrUnavailable)
		case <-t.C:
		}
	}
}

// RemoveReplica removes a replica from the group. Leader only.
func (n *Node) RemoveReplica(ctx context.Context, id string) error {
	if err := n.leaderOnly(); err != nil {
		return err
	}
	if _, ok, err := n.server(id); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("remove replica %s: %w", id, ErrUnknownMember)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx)).Error(); err != nil {
		return n.membershipErr("remove "+id, err)
	}
	return nil
}

// TransferLeader hands leadership to the voter id ("" = any up-to-date
// voter) and returns once the transfer finished. Leader only.
func (n *Node) TransferLeader(ctx context.Context, id string) error {
	if err := n.leaderOnly(); err != nil {
		return err
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		s, ok, err := n.server(id)
		if err != nil {
			return err
		}
		if !ok || s.Suffrage != raft.Voter {
			return fmt.Errorf("transfer leadership to %s: %w (or not a voter)", id, ErrUnknownMember)
		}
		f = n.raft.LeadershipTransferToServer(s.ID, s.Address)
	}
	if err := f.Error(); err != nil {
		return n.membershipErr("transfer leadership", err)
	}
	return nil
}

func (n *Node) membershipErr(what string, err error) error {
	switch err {
	case raft.ErrNotLeader, raft.ErrLeadershipTransferInProgress:
		return n.notLeader()
	}
	return fmt.Errorf("%s: %v: %w", what, err, errs.ErrUnavailable)
}

func (n *Node) addressHolder(addr string) (string, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", fmt.Errorf("read group configuration: %v: %w", err, errs.ErrUnavailable)
	}
	for _, s := range f.Configuration().Servers {
		if _, hostport := splitRaftAddr(s.Address); hostport == addr {
			return string(s.ID), nil
		}
	}
	return "", nil
}
