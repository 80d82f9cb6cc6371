package walraft

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
	"k8s.io/utils/clock"
)

// Config configures one replica of a group.
type Config struct {
	// Dir is the replica directory: raft log, snapshots, the applied
	// engine (wal/), its progress record and the identity file.
	Dir string
	// Group names the group; peers of another group are refused.
	Group string
	// Name is the operator-facing replica name. The raft server id is Name
	// plus a random suffix generated on the first start of an empty Dir.
	Name string
	// PeerAddr is the raft transport's listen and advertise address.
	PeerAddr string
	// Bootstrap creates a single-voter group with this replica, only when
	// Dir is empty (first start of a new group); otherwise it is ignored.
	Bootstrap bool
	// PeerTLS is the mutual TLS configuration of the peer transport (it
	// must require and verify client certificates); nil is plaintext.
	PeerTLS *tls.Config
	// Engine configures the applied engine. MaxGenerationBytes must be
	// equal on every replica of a group (the handshake refuses others);
	// MaxGenerationAge is enforced by the leader through Seal commands.
	Engine wal.Options
	// Raft timing; zero values give defaults suited to a LAN.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// SnapshotThreshold is the number of new raft entries after which a
	// snapshot is taken and the raft log compacted (default 8192).
	SnapshotThreshold uint64
	// TrailingLogs is how many raft entries a compaction keeps behind a
	// snapshot, so a briefly lagging follower catches up from the log
	// rather than a snapshot (default 10240).
	TrailingLogs uint64
	// Clock drives the leader's age sealing; default the real clock.
	Clock clock.WithTicker
	// Logger receives replica events; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Dir == "":
		return c, fmt.Errorf("walraft: replica directory is empty: %w", errs.ErrInvalid)
	case c.Group == "":
		return c, fmt.Errorf("walraft: group name is empty: %w", errs.ErrInvalid)
	case c.PeerAddr == "":
		return c, fmt.Errorf("walraft: peer address is empty: %w", errs.ErrInvalid)
	}
	if err := wal.ValidateName(c.Name); err != nil {
		return c, fmt.Errorf("walraft: replica name: %w", err)
	}
	if c.Engine.MaxGenerationBytes <= 0 {
		c.Engine.MaxGenerationBytes = wal.DefaultMaxGenerationBytes
	}
	if c.Engine.MaxGenerationAge == 0 {
		c.Engine.MaxGenerationAge = wal.DefaultMaxGenerationAge
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = time.Second
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = time.Second
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
