package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
)

// InspectOptions of `walctl claim inspect`.
type InspectOptions struct {
	deps
	Now   func() time.Time
	Table string
}

// NewCmdInspect returns `claim inspect`.
func NewCmdInspect(f *cmdutil.Factory, runF func(context.Context, *InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{deps: newDeps(f), Now: f.Now}
	cmd := &cobra.Command{
		Use:   "inspect [--table T]",
		Short: "Show who holds each table's claim, its lease TTL left, epoch and age",
		Long: `Show the claim of one table (or of every claimed table), read linearizably
from etcd: the owner, the lease and the TTL etcd has left on it, the publisher
epoch recorded under the claim, when it was taken and its CreateRevision (the
claim's identity, used by 'claim revoke --expect-revision').`,
		Example: "  walctl claim inspect\n  walctl claim inspect --table orders --output json",
		Args:    cmdutil.TableArgs("claim inspect", &opts.Table, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return inspectRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Table, "only this table")
	return cmd
}

func inspectRun(ctx context.Context, opts *InspectOptions) error {
	co, err := opts.Coord(ctx)
	if err != nil {
		return err
	}
	claims := []coord.ClaimInfo{}
	if opts.Table != "" {
		c, err := co.Get(ctx, opts.Table)
		if err != nil {
			return err
		}
		claims = append(claims, c)
	} else if all, err := co.List(ctx); err != nil {
		return err
	} else {
		claims = append(claims, all...)
	}
	now := opts.Now()
	return opts.Print(claims, func() *render.Table {
		t := render.NewTable("table", "owner", "kind", "epoch", "ttl left", "held for", "revision")
		for _, c := range claims {
			ttl := "expiring"
			if c.TTLLeft >= 0 {
				ttl = c.TTLLeft.Round(time.Second).String()
			}
			t.Add(c.Table, c.Owner.ID, c.Owner.Kind, fmt.Sprint(c.Epoch), ttl, now.Sub(c.HeldSince).Round(time.Second).String(), fmt.Sprint(c.CreateRevision))
		}
		return t
	})
}
