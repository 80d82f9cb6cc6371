// Package cmdtest helps tests of the command layer: it runs one verb the way
// the root command would (real configuration loading: flags, WALCTL_*
// environment, config file, defaults) and captures the options its RunE
// hands to the run function, without running it.
package cmdtest

import (
	"context"
	"testing"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// Parse builds a verb with newCmd, executes it with args and returns the
// options that reached the run function (nil when parsing or validation
// failed first), the factory whose configuration was loaded, and the error.
// The user's config file is never read: XDG_CONFIG_HOME points at an empty
// temporary directory.
func Parse[O any](t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *O) error) *cobra.Command, args []string) (*O, *cmdutil.Factory, error) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios)
	var got *O
	cmd := newCmd(f, func(_ context.Context, o *O) error { got = o; return nil })
	cmdutil.AddSettingFlags(cmd.PersistentFlags(), cmdutil.KeyConfig)
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		cfg, err := cmdutil.LoadConfig(c)
		f.Config = cfg
		return err
	}
	cmd.SetArgs(args)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(context.Background())
	return got, f, err
}
