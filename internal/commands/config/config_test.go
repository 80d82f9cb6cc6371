package config

import (
	"context"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
)

// config show lists every setting with its typed value and source, and
// never shows a secret.
func TestShowRun(t *testing.T) {
	t.Setenv("WALCTL_WAL_TOKEN", "s3cret")
	t.Setenv("WALCTL_WORKER_MEMORY_BUDGET", "64MiB")
	o, _, err := cmdtest.Parse(t, NewCmdShow, nil)
	if err != nil {
		t.Fatal(err)
	}
	var printed any
	o.Print = func(v any, _ func() *render.Table) error { printed = v; return nil }
	if err := showRun(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range printed.(ShowResult).Settings {
		got[e.Key] = e
	}
	if e := got[cmdutil.KeyWALToken]; e.Value != "<redacted>" || e.Source != cmdutil.SourceEnv {
		t.Fatalf("token %+v", e)
	}
	if e := got[cmdutil.KeyMemoryBudget]; e.Value != int64(64<<20) || e.Source != cmdutil.SourceEnv {
		t.Fatalf("budget %+v", e)
	}
	if e := got[cmdutil.KeyCommandTimeout]; e.Value != "30s" || e.Source != cmdutil.SourceDefault {
		t.Fatalf("timeout %+v", e)
	}
}
