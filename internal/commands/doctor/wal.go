package doctor

import (
	"context"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/health"
	"github.com/walctl/walctl/internal/core/publish"
)

// walChecks checks that the WAL answers within --command-timeout, then that
// no table's published watermark is behind the WAL's trimmed point.
func walChecks(ctx context.Context, opts *Options) []health.Check {
	cctx, cancel := opts.CallContext(ctx)
	c, log, tables := health.WAL(cctx, opts.WALTarget, opts.WAL)
	cancel()
	if log == nil {
		return []health.Check{c}
	}
	cctx, cancel = opts.CallContext(ctx)
	defer cancel()
	wm := func(table string) (map[int]uint64, error) {
		return publish.LatestWatermarksOn(cmdutil.RootStore(opts.Store, opts.LanceRoot), table)
	}
	return append([]health.Check{c}, health.Watermarks(cctx, log, tables, wm)...)
}
