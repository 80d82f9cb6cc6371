// Package claim implements `walctl claim`.
package claim

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
)

// NewCmdClaim returns the `claim` command group.
func NewCmdClaim(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claim <command>",
		Short: "Inspect, revoke and audit table claims (who owns what)",
	}
	cmd.AddCommand(NewCmdInspect(f, nil), NewCmdRevoke(f, nil), NewCmdHistory(f, nil))
	return cmd
}

// Coord is what the claim verbs need of the coordination client.
type Coord interface {
	Get(ctx context.Context, table string) (coord.ClaimInfo, error)
	List(ctx context.Context) ([]coord.ClaimInfo, error)
	Revoke(ctx context.Context, req coord.RevokeRequest) (coord.RevokeResult, error)
	Audit(ctx context.Context, table string) ([]coord.AuditEntry, error)
}

// deps are the lazy dependencies every claim verb copies from the factory.
type deps struct {
	Coord func(context.Context) (Coord, error)
	Print func(any, func() *render.Table) error
}

func newDeps(f *cmdutil.Factory) deps {
	return deps{
		Coord: func(ctx context.Context) (Coord, error) { return f.Coord(ctx) },
		Print: f.Print,
	}
}
