package table

import (
	"context"
	"fmt"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corepublish "github.com/walctl/walctl/internal/core/publish"
)

// CompactOptions of `walctl table compact`.
type CompactOptions struct {
	deps
	claimedDeps
	Name        string
	TargetBytes int64
}

// NewCmdCompact returns `table compact`.
func NewCmdCompact(f *cmdutil.Factory, runF func(context.Context, *CompactOptions) error) *cobra.Command {
	opts := &CompactOptions{deps: newDeps(f), claimedDeps: newClaimedDeps(f), TargetBytes: corepublish.DefaultCompactBytes}
	cmd := &cobra.Command{
		Use:   "compact --table T [--target-bytes SIZE]",
		Short: "Merge small published files under the table's claim",
		Long: `Take the table's claim (so no worker or catch-up publishes meanwhile), fence
it like a publisher, and merge runs of adjacent small fragments (none with a
deletion file, each at most half of --target-bytes) into files of up to
--target-bytes: one Lance Rewrite commit per run, against the exact latest
version and under this epoch. Watermarks, epoch and plan keys are unchanged;
the rows keep their order; 'table history' shows each commit as a
compaction, and walctl records which files each new one merged so 'verify'
can still name WAL positions after 'table clean' removed the originals.

JSON shape (stable): {"table", "epoch", "groups": [{"replaced": [fragment
ids], "file", "rows", "bytes", "version"}], "watermarks": {shard: position}}.
` + claimedHelp,
		Example: `  walctl table compact --table orders
  walctl table compact --table orders --target-bytes 256MiB --output json | jq '.groups | length'`,
		Args: cmdutil.TableArgs("table compact", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			if opts.TargetBytes <= 0 {
				return cmdutil.FlagErrorf("--target-bytes must be positive")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return compactRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	cmd.Flags().Var(&cmdutil.ByteSize{V: &opts.TargetBytes}, "target-bytes", "size of the merged files")
	return cmd
}

func compactRun(ctx context.Context, opts *CompactOptions) error {
	return withClaim(ctx, opts.deps, opts.claimedDeps, opts.Name, func(s *corepublish.Session) error {
		res, err := s.Compact(ctx, opts.TargetBytes)
		if err != nil {
			return err
		}
		return opts.Print(res, func() *render.Table {
			t := render.NewTable("version", "replaced fragments", "file", "rows", "bytes")
			for _, g := range res.Groups {
				t.Add(fmt.Sprint(g.Version), fmt.Sprint(g.Replaced), g.File, fmt.Sprint(g.Rows), humanize.IBytes(g.Bytes))
			}
			fmt.Fprintf(opts.ErrOut, "compacted %s at epoch %d: %d merge(s)\n", res.Table, res.Epoch, len(res.Groups))
			return t
		})
	})
}
