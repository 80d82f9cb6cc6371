// Package config implements `walctl config`.
package config

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
)

// NewCmdConfig returns the `config` command group.
func NewCmdConfig(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config <command>",
		Short: "Inspect walctl's configuration",
	}
	cmd.AddCommand(NewCmdShow(f, nil))
	return cmd
}

// ShowOptions of `walctl config show`.
type ShowOptions struct {
	Config *cmdutil.Config
	Print  func(any, func() *render.Table) error
}

// Entry is one setting in the output of `config show`.
type Entry struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"` // flag, env, file or default
	Env    string `json:"env"`
}

// ShowResult is the JSON shape of `config show`.
type ShowResult struct {
	ConfigFile string  `json:"config_file"`
	Settings   []Entry `json:"settings"`
}

// NewCmdShow returns `config show`.
func NewCmdShow(f *cmdutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{Print: f.Print}
	return &cobra.Command{
		Use:   "show",
		Short: "Show the effective configuration and where each value comes from",
		Long: `Show every setting with its effective value and its source: flag, env
(WALCTL_<KEY>, dots and dashes as underscores), file (the YAML config file) or
default. Precedence is flag > env > file > default.`,
		Example: `  walctl config show
  WALCTL_ETCD_PREFIX=/prod walctl config show --output json | jq '.settings[] | select(.source != "default")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Config = f.Config
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return showRun(cmd.Context(), opts)
		},
	}
}

func showRun(_ context.Context, opts *ShowOptions) error {
	cfg := opts.Config
	res := ShowResult{ConfigFile: cfg.File(), Settings: []Entry{}}
	for _, s := range cmdutil.Settings() {
		v := cfg.Value(s.Key)
		if d, ok := v.(time.Duration); ok {
			v = d.String() // "30s" reads better than nanoseconds and parses back
		}
		if str, ok := v.(string); ok && s.Secret && str != "" {
			v = "<redacted>"
		}
		res.Settings = append(res.Settings, Entry{Key: s.Key, Value: v, Source: cfg.Source(s.Key), Env: s.Env()})
	}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("key", "value", "source", "env")
		for _, e := range res.Settings {
			t.Add(e.Key, format(e.Value), e.Source, e.Env)
		}
		return t
	})
}

func format(v any) string {
	switch x := v.(type) {
	case []string:
		if len(x) == 0 {
			return "-"
		}
		return fmt.Sprint(x)
	case string:
		if x == "" {
			return "-"
		}
	}
	return fmt.Sprint(v)
}
