package table

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/lineage"
	"github.com/walctl/walctl/internal/core/objstore"
)

// HistoryOptions of `walctl table history`.
type HistoryOptions struct {
	deps
	Store objstore.Store
	Now   func() time.Time
	Name  string
	Since string
	Limit int
}

// HistoryResult is the JSON shape of `table history`: the table and its
// versions, oldest first (see lineage.Version for each key).
type HistoryResult struct {
	Table    string            `json:"table"`
	Versions []lineage.Version `json:"versions"`
}

// NewCmdHistory returns `table history`.
func NewCmdHistory(f *cmdutil.Factory, runF func(context.Context, *HistoryOptions) error) *cobra.Command {
	opts := &HistoryOptions{deps: newDeps(f), Now: time.Now}
	cmd := &cobra.Command{
		Use:   "history --table T [--since D|TIME] [--limit N]",
		Short: "One line per table version: its origin, WAL ranges and committer",
		Long: `List a table's Lance versions, oldest first, with where each came from:
the operation (create, fence, publication, foreign-append, compaction, other),
the walctl epoch and plan id it carries, the WAL positions it published per
shard, the rows and bytes of the fragments it added, and who committed it (a
worker's id, or a catch-up Job id and execution; none for another writer).
It reads manifests only: no claim, no epoch, nothing written.

JSON shape (stable): {"table": T, "versions": [{"version", "time",
"operation", "transaction", "epoch", "plan", "ranges": [{"shard", "from",
"to", "bytes"}], "rows", "bytes", "committer": {"id", "kind", "job_id",
"execution"} or null, "writer"}]}.

EXIT STATUS
  0  the history was printed
  2  bad flags
  3  the table has no Lance dataset`,
		Example: `  walctl table history --table orders
  walctl table history --table orders --since 24h --limit 20
  walctl table history --table orders --output json | jq '.versions[] | select(.operation=="foreign-append")'`,
		Args: cmdutil.TableArgs("table history", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if opts.Limit < 0 {
				return cmdutil.FlagErrorf("--limit must not be negative")
			}
			if _, err := since(opts.Since, opts.Now); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	cmd.Flags().StringVar(&opts.Since, "since", "", "only versions committed after this: a duration back from now (24h) or an RFC 3339 time")
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "only the newest N versions (0: all)")
	return cmd
}

// since parses --since: a duration back from now or an RFC 3339 time.
func since(s string, now func() time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, cmdutil.FlagErrorf("--since %q is neither a duration (24h) nor an RFC 3339 time", s)
	}
	return t, nil
}

func historyRun(ctx context.Context, opts *HistoryOptions) error {
	from, err := since(opts.Since, opts.Now)
	if err != nil {
		return err
	}
	vs, err := lineage.History(ctx, opts.Store, opts.Name, lineage.Options{Since: from, Limit: opts.Limit})
	if err != nil {
		return err
	}
	res := HistoryResult{Table: opts.Name, Versions: vs}
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("version", "time", "operation", "epoch", "plan", "WAL ranges", "rows", "bytes", "committer")
		for _, v := range vs {
			t.Add(fmt.Sprint(v.Version), v.Time.Format(time.RFC3339), v.Operation, fmt.Sprint(v.Epoch), short(v.Plan),
				ranges(v), fmt.Sprint(v.Rows), humanize.IBytes(uint64(v.Bytes)), committer(v))
		}
		return t
	})
}

func ranges(v lineage.Version) string {
	var out []string
	for _, r := range v.Ranges {
		out = append(out, fmt.Sprintf("%d:%d–%d", r.Shard, r.From, r.To))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

func committer(v lineage.Version) string {
	c := v.Committer
	switch {
	case c == nil:
		return v.Writer
	case c.JobID != "":
		return fmt.Sprintf("%s job %s exec %s", c.Kind, c.JobID, c.Execution)
	}
	return c.Kind + " " + c.ID
}

func short(plan string) string {
	if plan == "" {
		return "-"
	}
	return plan
}
