package cmdutil

import (
	"context"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/placement"
	"github.com/walctl/walctl/internal/core/walflight"
)

// WALGroups returns the configured replicated WAL groups (wal-groups); a
// malformed value is errs.ErrInvalid naming the setting.
func (f *Factory) WALGroups() (walflight.Groups, error) {
	g, err := walflight.ParseGroups(f.Config.String(KeyWALGroups))
	if err != nil {
		return nil, fmt.Errorf("setting %s: %w", KeyWALGroups, err)
	}
	return g, nil
}

// Placement returns the etcd store of tables' WAL group placements.
func (f *Factory) Placement(ctx context.Context) (*placement.Store, error) {
	cli, err := f.Etcd(ctx)
	if err != nil {
		return nil, err
	}
	return placement.New(cli, f.Config.Global.EtcdPrefix, f.Config.Global.CommandTimeout), nil
}

// walClientOptions are the client options of every WAL server connection.
func (f *Factory) walClientOptions() walflight.ClientOptions {
	return walflight.ClientOptions{
		Conns:  f.Config.Int(KeyWALConns),
		Token:  f.Config.Global.WALToken,
		TLS:    f.Config.Bool(KeyWALTLS),
		CAFile: f.Config.String(KeyWALCAFile),
		// Every later call is bounded too, a streaming read per message.
		CallTimeout: f.Config.Global.CommandTimeout,
	}
}

// WALRouter returns the wal.Log of the configured WAL groups, opened once:
// each table's calls go to the group recorded for it in etcd. It is what
// WAL returns when wal-groups is set and --wal is not.
func (f *Factory) WALRouter(ctx context.Context) (*walflight.Router, error) {
	log, err := f.WAL(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := log.(*walflight.Router)
	if !ok {
		return nil, fmt.Errorf("no replicated WAL groups are configured (set %s, flag --%s or env WALCTL_WAL_GROUPS): %w",
			KeyWALGroups, KeyWALGroups, errs.ErrInvalid)
	}
	return r, nil
}

// WALGroup returns the client of one configured WAL group (for membership
// commands, which need no etcd).
func (f *Factory) WALGroup(name string) (*walflight.GroupClient, error) {
	groups, err := f.WALGroups()
	if err != nil {
		return nil, err
	}
	addrs, err := groups.Members(name)
	if err != nil {
		return nil, err
	}
	c, err := walflight.NewGroupClient(name, addrs, f.walClientOptions())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.closers = append(f.closers, func() { c.Close() })
	f.mu.Unlock()
	return c, nil
}

// newWALRouter builds the router over the configured groups; f.mu is held.
func (f *Factory) newWALRouter(groups walflight.Groups) *walflight.Router {
	r := walflight.NewRouter(groups, lazyPlacement{f}, f.walClientOptions())
	f.closers = append(f.closers, func() { r.Close() })
	return r
}

// lazyPlacement connects to etcd on the first lookup only.
type lazyPlacement struct{ f *Factory }

func (l lazyPlacement) Group(ctx context.Context, table string) (string, error) {
	p, err := l.f.Placement(ctx)
	if err != nil {
		return "", err
	}
	return p.Group(ctx, table)
}
