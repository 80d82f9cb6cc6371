package walraft

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/errs"
)

// Status is what a replica reports about itself over the peer transport.
type Status struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Group        string `json:"group"`
	PeerAddr     string `json:"peer_addr"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id,omitempty"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// GenBytes is the replica's MaxGenerationBytes (equal in a group).
	GenBytes int64 `json:"gen_bytes"`
}

// Status describes this replica.
func (n *Node) Status() Status {
	_, leader := n.raft.LeaderWithID()
	return Status{
		ID: n.ident.ID, Name: n.ident.Name, Group: n.cfg.Group, PeerAddr: n.PeerAddr(),
		State: n.raft.State().String(), LeaderID: string(leader), Term: n.raft.CurrentTerm(),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
		GenBytes: n.cfg.Engine.MaxGenerationBytes,
	}
}

// QueryStatus asks the replica at peerAddr for its Status over the peer
// transport (with tlsConf for mutual TLS). A replica of another group
// refuses (ErrRefused); an unreachable one is errs.ErrUnavailable.
func QueryStatus(ctx context.Context, peerAddr, group string, tlsConf *tls.Config) (Status, error) {
	timeout := timeoutOf(ctx)
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	c, line, err := dial(peerAddr, tlsConf, hello{V: 1, Group: group, Kind: kindStatus}, timeout)
	if err != nil {
		return Status{}, err
	}
	c.Close()
	var st Status
	if err := json.Unmarshal(line, &st); err != nil {
		return Status{}, fmt.Errorf("peer %s: status reply: %v: %w", peerAddr, err, errs.ErrUnavailable)
	}
	return st, nil
}

// Member is one server of the group's configuration as seen from here.
type Member struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	PeerAddr     string `json:"peer_addr"`
	Voter        bool   `json:"voter"`
	Leader       bool   `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	// Lag is the leader's last index minus the member's applied index
	// (when both are known).
	Lag uint64 `json:"lag"`
	// Error says why the member's status could not be fetched.
	Error string `json:"error,omitempty"`
}

// Members lists the group's configuration (as this replica knows it) with
// each member's applied index, fetched over the peer transport.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read group configuration: %v: %w", err, errs.ErrUnavailable)
	}
	_, leader := n.raft.LeaderWithID()
	var out []Member
	var leaderLast uint64
	for _, s := range f.Configuration().Servers {
		_, hostport := splitRaftAddr(s.Address)
		m := Member{ID: string(s.ID), Name: nameOf(string(s.ID)), PeerAddr: hostport, Voter: s.Suffrage == raft.Voter, Leader: s.ID == leader}
		st, err := n.memberStatus(ctx, s)
		if err != nil {
			m.Error = err.Error()
		} else {
			m.AppliedIndex, m.Name = st.AppliedIndex, st.Name
			if m.Leader {
				leaderLast = st.LastIndex
			}
		}
		out = append(out, m)
	}
	for i := range out {
		if out[i].Error == "" && leaderLast > out[i].AppliedIndex {
			out[i].Lag = leaderLast - out[i].AppliedIndex
		}
	}
	return out, nil
}

func (n *Node) memberStatus(ctx context.Context, s raft.Server) (Status, error) {
	if string(s.ID) == n.ident.ID {
		return n.Status(), nil
	}
	_, hostport := splitRaftAddr(s.Address)
	st, err := QueryStatus(ctx, hostport, n.cfg.Group, n.cfg.PeerTLS)
	if err == nil && st.ID != string(s.ID) {
		err = fmt.Errorf("address %s now answers as replica %s (wiped or replaced)", hostport, st.ID)
	}
	return st, err
}

func nameOf(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

func (n *Node) leaderOnly() error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	return nil
}

// timeoutOf is what is left of ctx's deadline (0: none), for raft's
// timeout arguments.
func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 0
}

func (n *Node) server(id string) (raft.Server, bool, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, false, fmt.Errorf("read group configuration: %v: %w", err, errs.ErrUnavailable)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return s, true, nil
		}
	}
	return raft.Server{}, false, nil
}
