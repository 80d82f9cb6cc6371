package cmdutil

import "github.com/spf13/cobra"

// ExactArgs is cobra.ExactArgs with a usage error (exit 2) that says what
// is missing.
func ExactArgs(n int, msg string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return FlagErrorf("%s (got %d arguments)", msg, len(args))
		}
		return nil
	}
}

// MaxArgs is cobra.MaximumNArgs with a usage error.
func MaxArgs(n int, msg string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return FlagErrorf("%s (got %d arguments)", msg, len(args))
		}
		return nil
	}
}
