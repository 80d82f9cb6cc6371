package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
)

// Coord returns the etcd coordination client (connected once).
func (f *Factory) Coord(ctx context.Context) (*coord.Client, error) {
	cli, err := f.Etcd(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.coord != nil {
		return f.coord, nil
	}
	c, err := coord.New(cli, coord.Config{
		Endpoints:   cli.Endpoints(),
		CallTimeout: f.Config.Global.CommandTimeout,
		Prefix:      f.Config.Global.EtcdPrefix,
		ClaimTTL:    f.Config.Duration(KeyClaimTTL),
	})
	if err != nil {
		return nil, err
	}
	// Fail fast on a dead etcd: one probe within --command-timeout, rather
	// than every later call (per table, per retry) waiting out its own.
	if err := c.Probe(ctx, f.Config.Global.CommandTimeout); err != nil {
		return nil, err
	}
	f.coord = c
	f.closers = append(f.closers, func() { c.Close() })
	return c, nil
}

// Owner identifies this process in claims: kind, host and pid.
func (f *Factory) Owner(kind string) coord.Owner {
	host, _ := os.Hostname()
	return coord.Owner{ID: fmt.Sprintf("%s/%s/%d/%d", kind, host, os.Getpid(), f.Now().UnixNano()), Kind: kind, Host: host, PID: os.Getpid()}
}

// Publisher builds a publisher over the configured WAL, etcd and Lance root.
// claimOpts are passed to every claim it takes (e.g. the worker's slice, so
// `claim inspect` shows it).
func (f *Factory) Publisher(ctx context.Context, owner coord.Owner, claimOpts ...coord.AcquireOption) (*publish.Publisher, error) {
	return f.PublisherWith(ctx, owner, nil, claimOpts...)
}

// PublicationConfig is the configured shape of publication for owner:
// plan limits, a memory budget and fetch permits of its own, the
// preparation mode, claimOpts and the logger; no Lance root.
func (f *Factory) PublicationConfig(owner coord.Owner, claimOpts ...coord.AcquireOption) publish.Config {
	return publish.Config{
		Limits: publish.Limits{
			MaxBytes:       f.Config.Int64(KeyPlanMaxBytes),
			MaxGenerations: f.Config.Int(KeyPlanMaxGenerations),
			FileBytes:      f.Config.Int64(KeyFileBytes),
		},
		Budget:              budget.New(f.Config.Int64(KeyMemoryBudget)),
		Permits:             budget.NewPermits(budget.DefaultPermits),
		PipelinePreparation: f.Config.Bool(KeyPipeline),
		Owner:               owner,
		ClaimOptions:        claimOpts,
		Logger:              f.Logger,
	}
}

// PublisherWith is Publisher with the configuration adjusted by adjust
// (when not nil) before the publisher is built: catch-up sets its batch
// limits, merge budget and commit guard there.
func (f *Factory) PublisherWith(ctx context.Context, owner coord.Owner, adjust func(*publish.Config), claimOpts ...coord.AcquireOption) (*publish.Publisher, error) {
	if f.Config.Global.LanceLocation.IsS3() {
		// A writer's start: refuse a store whose conditional creates are not
		// honoured. A local filesystem's link(2) is (POSIX); doctor probes it.
		if err := f.ProbeLanceStore(ctx); err != nil && !errors.Is(err, ErrUnsafeStoreAllowed) {
			return nil, err
		}
	}
	log, err := f.WAL(ctx)
	if err != nil {
		return nil, err
	}
	co, err := f.Coord(ctx)
	if err != nil {
		return nil, err
	}
	store, err := f.LanceStore(ctx)
	if err != nil {
		return nil, err
	}
	cfg := f.PublicationConfig(owner, claimOpts...)
	cfg.LanceRoot, cfg.Store = f.Config.Global.LanceRoot, store
	if adjust != nil {
		adjust(&cfg)
	}
	return publish.New(log, co, cfg), nil
}
