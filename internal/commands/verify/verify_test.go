package verify

import (
	"context"
	"testing"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

func parse(t *testing.T, args []string) (*Options, error) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios)
	var got *Options
	cmd := NewCmdVerify(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		cfg, err := cmdutil.LoadConfig(c)
		f.Config = cfg
		return err
	}
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(context.Background())
	return got, err
}

func TestVerifyFlags(t *testing.T) {
	o, err := parse(t, []string{"--table", "orders", "--version", "7"})
	if err != nil || o.Table != "orders" || o.Version != 7 {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := parse(t, nil); !cmdutil.IsFlagError(err) {
		t.Fatalf("no --table: %v", err)
	}
	if _, err := parse(t, []string{"orders"}); err == nil {
		t.Fatal("a positional argument was accepted")
	}
}
