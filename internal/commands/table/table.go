// Package table implements `walctl table`.
package table

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/wal"
)

// NewCmdTable returns the `table` command group.
func NewCmdTable(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "table <command>",
		Short: "Register, list, describe and read tables; their lineage",
	}
	cmd.AddCommand(NewCmdCreate(f, nil), NewCmdDescribe(f, nil), NewCmdList(f, nil), NewCmdRead(f, nil),
		NewCmdHistory(f, nil), NewCmdLocate(f, nil), NewCmdCompact(f, nil), NewCmdClean(f, nil),
		NewCmdStopped(f, nil), NewCmdResume(f, nil))
	return cmd
}

// deps are the lazy dependencies the table verbs copy from the factory.
type deps struct {
	WAL         func(context.Context) (wal.Log, error)
	CallContext func(context.Context) (context.Context, context.CancelFunc)
	Print       func(any, func() *render.Table) error
	ErrOut      io.Writer
}

func newDeps(f *cmdutil.Factory) deps {
	return deps{WAL: f.WAL, CallContext: f.CallContext, Print: f.Print, ErrOut: f.IOStreams.ErrOut}
}
