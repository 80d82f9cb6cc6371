package table

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/schemaspec"
	"github.com/walctl/walctl/internal/core/wal"
)

// DescribeOptions of `walctl table describe`.
type DescribeOptions struct {
	deps
	Name string
}

// Description is the JSON shape of `table describe` and `table create`.
type Description struct {
	Name    string             `json:"name"`
	Shards  int                `json:"shards"`
	Epoch   uint64             `json:"epoch"`
	Created time.Time          `json:"created"`
	Fields  []schemaspec.Field `json:"fields"`
}

// NewCmdDescribe returns `table describe`.
func NewCmdDescribe(f *cmdutil.Factory, runF func(context.Context, *DescribeOptions) error) *cobra.Command {
	opts := &DescribeOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:     "describe --table T",
		Short:   "Show a table's schema, shard count and publisher epoch",
		Example: "  walctl table describe --table orders\n  walctl table describe --table orders --output json | jq '.fields[].name'",
		Args:    cmdutil.TableArgs("table describe", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return describeRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	return cmd
}

func describeRun(ctx context.Context, opts *DescribeOptions) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := opts.CallContext(ctx)
	defer cancel()
	info, err := log.Table(cctx, opts.Name)
	if err != nil {
		return err
	}
	return printInfo(opts.deps, info)
}

func printInfo(d deps, info wal.TableInfo) error {
	desc := Description{Name: info.Name, Shards: info.Shards, Epoch: info.Epoch, Created: info.Created, Fields: schemaspec.Fields(info.Schema)}
	return d.Print(desc, func() *render.Table {
		t := render.NewTable("field", "type", "nullable")
		for _, fl := range desc.Fields {
			t.Add(fl.Name, fl.Type, fmt.Sprint(fl.Nullable))
		}
		fmt.Fprintf(d.ErrOut, "table %s: %d shard(s), publisher epoch %d, created %s\n",
			desc.Name, desc.Shards, desc.Epoch, desc.Created.Format(time.RFC3339))
		return t
	})
}
