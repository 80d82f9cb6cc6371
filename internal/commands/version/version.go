// Package version implements `walctl version`.
package version

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/buildinfo"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
)

// Options of `walctl version`.
type Options struct {
	Print func(any, func() *render.Table) error
}

// NewCmdVersion returns the version command; runF replaces the run function
// in tests.
func NewCmdVersion(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Print: f.Print}
	return &cobra.Command{
		Use:     "version",
		Short:   "Print walctl's version, commit, build date and Go version",
		Example: "  walctl version\n  walctl version --output json | jq -r .version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return versionRun(cmd.Context(), opts)
		},
	}
}

func versionRun(_ context.Context, opts *Options) error {
	info := buildinfo.Get()
	return opts.Print(info, func() *render.Table {
		t := render.NewTable("field", "value")
		t.Add("version", info.Version)
		t.Add("commit", info.Commit)
		t.Add("date", info.Date)
		t.Add("go", info.GoVersion)
		t.Add("platform", info.Platform)
		return t
	})
}
