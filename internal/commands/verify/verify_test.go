package verify

import (
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
)

func parse(t *testing.T, args []string) (*Options, error) {
	t.Helper()
	o, _, err := cmdtest.Parse(t, NewCmdVerify, args)
	return o, err
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
