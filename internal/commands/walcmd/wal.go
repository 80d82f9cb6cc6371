// Package walcmd implements `walctl wal`: the producer side of the WAL and
// its server.
package walcmd

import (
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// NewCmdWAL returns the `wal` command group.
func NewCmdWAL(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal <command>",
		Short: "Append to, seal, inspect, serve and quarantine the write-ahead log",
	}
	cmd.AddCommand(NewCmdAppend(f, nil), NewCmdSeal(f, nil), NewCmdStats(f, nil), NewCmdServe(f, nil), NewCmdLoad(f, nil), NewCmdQuarantine(f, nil))
	return cmd
}
