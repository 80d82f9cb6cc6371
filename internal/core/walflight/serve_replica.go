package walflight

import (
	"context"
	"fmt"

	"github.com/walctl/walctl/internal/core/walraft"
)

// ServeReplica runs one replica of a replicated WAL group: it binds the
// client address first (so that a port in use fails before the replica
// joins anything, naming the address), opens the Raft node on cfg.Dir
// (which binds cfg.PeerAddr; see walraft.Open for bootstrap and joining),
// and serves the node over Arrow Flight, membership actions included, until
// ctx ends. Then it stops accepting, lets in-flight calls finish, closes the
// node and returns nil.
func ServeReplica(ctx context.Context, cfg walraft.Config, listenAddr string, opts ServeOptions) (err error) {
	if cfg.Logger == nil {
		cfg.Logger = opts.logger()
	}
	if cfg.Engine.Logger == nil {
		cfg.Engine.Logger = cfg.Logger
	}
	lis, err := listen(listenAddr)
	if err != nil {
		return err
	}
	node, err := walraft.Open(ctx, cfg)
	if err != nil {
		lis.Close()
		return fmt.Errorf("replica %s of WAL group %s (peer address %s, dir %s): %w", cfg.Name, cfg.Group, cfg.PeerAddr, cfg.Dir, err)
	}
	defer func() {
		if cerr := node.Close(); err == nil {
			err = cerr
		}
	}()
	opts.Server.Replica = node
	return serveOn(ctx, node, lis, opts, "group", cfg.Group, "replica", node.ID(), "peer_addr", node.PeerAddr(), "dir", cfg.Dir)
}
