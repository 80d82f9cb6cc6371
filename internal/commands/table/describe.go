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
	F    *cmdutil.Factory
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
	opts := &DescribeOptions{F: f}
	return &cobra.Command{
		Use:     "describe NAME",
		Short:   "Show a table's schema, shard count and publisher epoch",
		Example: "  walctl table describe orders\n  walctl table describe orders --output json | jq '.fields[].name'",
		Args:    cmdutil.ExactArgs(1, "table describe needs the table name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return describeRun(cmd.Context(), opts)
		},
	}
}

func describeRun(ctx context.Context, opts *DescribeOptions) error {
	log, err := opts.F.WAL(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := opts.F.CallContext(ctx)
	defer cancel()
	info, err := log.Table(cctx, opts.Name)
	if err != nil {
		return err
	}
	return printInfo(opts.F, info)
}

func printInfo(f *cmdutil.Factory, info wal.TableInfo) error {
	d := Description{Name: info.Name, Shards: info.Shards, Epoch: info.Epoch, Created: info.Created, Fields: schemaspec.Fields(info.Schema)}
	return f.Print(d, func() *render.Table {
		t := render.NewTable("field", "type", "nullable")
		for _, fl := range d.Fields {
			t.Add(fl.Name, fl.Type, fmt.Sprint(fl.Nullable))
		}
		fmt.Fprintf(f.IOStreams.ErrOut, "table %s: %d shard(s), publisher epoch %d, created %s\n",
			d.Name, d.Shards, d.Epoch, d.Created.Format(time.RFC3339))
		return t
	})
}
