// Package wal implements `walctl wal`: the producer side of the WAL and
// its server.
package wal

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	corewal "github.com/walctl/walctl/internal/core/wal"
)

// NewCmdWAL returns the `wal` command group.
func NewCmdWAL(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal <command>",
		Short: "Append to, seal, inspect, serve, replicate and quarantine the write-ahead log",
	}
	cmd.AddCommand(NewCmdAppend(f, nil), NewCmdSeal(f, nil), NewCmdStats(f, nil), NewCmdServe(f, nil), NewCmdLoad(f, nil), NewCmdQuarantine(f, nil),
		NewCmdMembers(f, nil), NewCmdAddReplica(f, nil), NewCmdRemoveReplica(f, nil), NewCmdTransferLeader(f, nil))
	return cmd
}

// deps are the lazy dependencies the wal verbs copy from the factory; fill
// completes the ones known only once the configuration is loaded.
type deps struct {
	WAL      func(context.Context) (corewal.Log, error)
	Print    func(any, func() *render.Table) error
	Progress func() *progress.Reporter
	Now      func() time.Time
	ErrOut   io.Writer
	Timeout  time.Duration
	Logger   *slog.Logger
}

func newDeps(f *cmdutil.Factory) deps {
	return deps{WAL: f.WAL, Print: f.Print, Progress: f.Progress, Now: f.Now, ErrOut: f.IOStreams.ErrOut}
}

func (d *deps) fill(f *cmdutil.Factory) {
	d.Timeout, d.Logger = f.Timeout(), f.Logger
}

func (d deps) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.Timeout)
}

// tableInfo returns the WAL and one table's registration.
func tableInfo(ctx context.Context, d deps, table string) (corewal.Log, corewal.TableInfo, error) {
	log, err := d.WAL(ctx)
	if err != nil {
		return nil, corewal.TableInfo{}, err
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	info, err := log.Table(cctx, table)
	return log, info, err
}
