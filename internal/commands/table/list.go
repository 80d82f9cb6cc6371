package table

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
)

// ListOptions of `walctl table list`.
type ListOptions struct {
	deps
	LanceRoot string
	Store     objstore.Store
}

// Listed is one row of `table list`. Version is null for a table nothing
// was published into yet.
type Listed struct {
	Name    string    `json:"name"`
	Shards  int       `json:"shards"`
	Epoch   uint64    `json:"epoch"`
	Created time.Time `json:"created"`
	Version *uint64   `json:"version"`
}

// NewCmdList returns `table list`.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{deps: newDeps(f)}
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered tables with their shards, epoch and latest Lance version",
		Long: `List every table registered in the WAL, by name: its shard count, publisher
epoch, registration time and the latest version of its Lance table (none when
nothing was published yet). Reads only; takes no claim.

JSON (--output json): a list of {"name", "shards", "epoch", "created",
"version"} (version null when nothing was published).`,
		Example: "  walctl table list\n  walctl table list --output json | jq -r '.[].name'",
		Args:    cmdutil.ExactArgs(0, "table list takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.LanceRoot = f.Global().LanceRoot
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *ListOptions) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := opts.CallContext(ctx)
	infos, err := log.Tables(cctx)
	cancel()
	if err != nil {
		return err
	}
	rows := []Listed{}
	for _, i := range infos {
		row := Listed{Name: i.Name, Shards: i.Shards, Epoch: i.Epoch, Created: i.Created}
		r, err := publish.OpenReaderOn(cmdutil.RootStore(opts.Store, opts.LanceRoot), i.Name, publish.Selection{})
		switch {
		case err == nil:
			row.Version = &r.Manifest.Version
		case !errors.Is(err, lance.ErrDatasetNotFound):
			return err
		}
		rows = append(rows, row)
	}
	return opts.Print(rows, func() *render.Table {
		t := render.NewTable("table", "shards", "epoch", "version", "created")
		for _, r := range rows {
			v := "-"
			if r.Version != nil {
				v = fmt.Sprint(*r.Version)
			}
			t.Add(r.Name, fmt.Sprint(r.Shards), fmt.Sprint(r.Epoch), v, r.Created.UTC().Format(time.RFC3339))
		}
		return t
	})
}
