package publish

import (
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	corepublish "github.com/walctl/walctl/internal/core/publish"
)

// parse runs the command built by newCmd with args through the real
// configuration loading and returns the factory's configuration.
func parse(t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *Options) error) *cobra.Command, args []string) (*Options, *cmdutil.Factory) {
	t.Helper()
	got, f, err := cmdtest.Parse(t, newCmd, args)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("run was not reached")
	}
	return got, f
}

// The streamed preparation and the memory budget are settings of publish
// and prepare: flag, environment, default off and 1 GiB.
func TestPipelineAndBudgetSettings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		newCmd   func(*cmdutil.Factory, func(context.Context, *Options) error) *cobra.Command
		args     []string
		env      map[string]string
		pipeline bool
		budget   int64
	}{
		{"publish default", NewCmdPublish, []string{"--table", "t"}, nil, false, 1 << 30},
		{"publish flags", NewCmdPublish, []string{"--table", "t", "--pipeline-preparation", "--memory-budget", "268435456"}, nil, true, 256 << 20},
		{"prepare env", NewCmdPrepare, []string{"--table", "t"}, map[string]string{
			"WALCTL_WORKER_PUBLICATION_PIPELINE_PREPARATION": "true", "WALCTL_WORKER_MEMORY_BUDGET": "1048576"}, true, 1 << 20},
		{"flag beats env", NewCmdPublish, []string{"--table", "t", "--pipeline-preparation=false"}, map[string]string{
			"WALCTL_WORKER_PUBLICATION_PIPELINE_PREPARATION": "true"}, false, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o, f := parse(t, tc.newCmd, tc.args)
			if o.Table != "t" || f.Config.Bool(cmdutil.KeyPipeline) != tc.pipeline || f.Config.Int64(cmdutil.KeyMemoryBudget) != tc.budget {
				t.Fatalf("table %q pipeline %v budget %d, want pipeline %v budget %d", o.Table,
					f.Config.Bool(cmdutil.KeyPipeline), f.Config.Int64(cmdutil.KeyMemoryBudget), tc.pipeline, tc.budget)
			}
		})
	}
}

// publishRun stops at the first dependency that fails, holding nothing.
func TestPublishRunPublisherError(t *testing.T) {
	down := errors.New("etcd down")
	opts := &Options{Table: "t", deps: deps{Owner: func(string) coord.Owner { return coord.Owner{} },
		Publisher: func(context.Context, coord.Owner, ...coord.AcquireOption) (*corepublish.Publisher, error) {
			return nil, down
		}}}
	if err := publishRun(context.Background(), opts); !errors.Is(err, down) {
		t.Fatalf("err = %v", err)
	}
}
