// Package table implements `walctl table`.
package table

import (
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// NewCmdTable returns the `table` command group.
func NewCmdTable(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "table <command>",
		Short: "Register and describe tables",
	}
	cmd.AddCommand(NewCmdCreate(f, nil), NewCmdDescribe(f, nil), NewCmdRead(f, nil))
	return cmd
}
