package table

import (
	"context"
	"log/slog"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	corepublish "github.com/walctl/walctl/internal/core/publish"
)

// claimedDeps are what the verbs that change a table's storage under its
// claim (compact, clean) need beyond deps.
type claimedDeps struct {
	Publisher func(context.Context, coord.Owner, ...coord.AcquireOption) (*corepublish.Publisher, error)
	Owner     func(kind string) coord.Owner
	Logger    *slog.Logger
}

func newClaimedDeps(f *cmdutil.Factory) claimedDeps {
	return claimedDeps{Publisher: f.Publisher, Owner: f.Owner, Logger: f.Logger}
}

// claimedHelp is the exit status the claimed verbs share.
const claimedHelp = `
EXIT STATUS
  0  done (also when there was nothing to do)
  2  bad flags
  3  unknown table, or no Lance dataset yet
  4  another holder has the table's claim (a worker's slice, a catch-up
     reservation), or a newer publisher fenced this one out: retry later`

// withClaim takes table's claim as a CLI owner, runs fn with the session
// and releases the claim, whatever fn returned.
func withClaim(ctx context.Context, d deps, c claimedDeps, table string, fn func(*corepublish.Session) error) (err error) {
	pub, err := c.Publisher(ctx, c.Owner(coord.OwnerCLI))
	if err != nil {
		return err
	}
	s, err := pub.Acquire(ctx, table)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := d.CallContext(context.WithoutCancel(ctx))
		defer cancel()
		if rerr := s.Release(rctx); rerr != nil && err == nil && c.Logger != nil {
			c.Logger.Warn("release claim", "table", table, "err", rerr)
		}
	}()
	return fn(s)
}
