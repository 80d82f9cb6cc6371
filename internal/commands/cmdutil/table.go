package cmdutil

import "github.com/spf13/cobra"

// TableFlag defines --table on cmd, the one way every verb names its table
// (DESIGN.md §5). A positional table is still accepted, undocumented, for
// scripts written before: see TableArgs.
func TableFlag(cmd *cobra.Command, p *string, usage string) {
	cmd.Flags().StringVar(p, "table", "", usage)
}

// TableArgs validates the positional arguments of a verb that takes its
// table with --table and, as a hidden alias, as its one argument; it stores
// the argument in *table. required makes a missing table a usage error.
func TableArgs(verb string, table *string, required bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > 1:
			return FlagErrorf("%s takes its table with --table (got %d arguments)", verb, len(args))
		case len(args) == 1 && *table != "" && *table != args[0]:
			return FlagErrorf("%s: give the table once, with --table", verb)
		case len(args) == 1:
			*table = args[0]
		}
		if required && *table == "" {
			return FlagErrorf("--table is required")
		}
		return nil
	}
}
