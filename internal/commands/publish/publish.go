// Package publish implements `walctl prepare` and `walctl publish`: the
// one-shot forms of a worker's round, fenced exactly like a worker.
package publish

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	corepublish "github.com/walctl/walctl/internal/core/publish"
)

// Options of `walctl prepare` and `walctl publish`.
type Options struct {
	deps
	Table   string
	All     bool
	Prepare bool // stop before the commit
}

const exitHelp = `
Exits 4 while another holder has the table's claim (or it is reserved for
catch-up), or when a newer publisher fences this one out.`

// NewCmdPrepare returns `walctl prepare`.
func NewCmdPrepare(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{deps: newDeps(f), Prepare: true}
	cmd := &cobra.Command{
		Use:   "prepare --table T",
		Short: "Claim, fence, pin (or adopt) a plan and prepare its files; no commit",
		Long: `Claim the table, advance its publisher epoch and fence it, adopt the pinned
plan (or plan from the sealed WAL generations above the watermarks and pin it),
and prepare its Lance data files — or reuse a prepared result that still
verifies. Nothing is committed: a later 'walctl publish', worker or catch-up
adopts the pinned plan and reuses the prepared files exactly.` + exitHelp,
		Example: "  walctl prepare --table orders\n  walctl prepare --table orders --output json | jq -r '.rounds[].files[]'",
		Args:    cmdutil.ExactArgs(0, "prepare takes no arguments (use --table)"),
		RunE:    run(f, opts, runF),
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.PublicationKeys...)
	return cmd
}

// NewCmdPublish returns `walctl publish`.
func NewCmdPublish(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "publish --table T [--all]",
		Short: "Claim, fence, adopt the pinned plan (preparing it if needed) and commit",
		Long: `Claim the table, advance its publisher epoch and fence it, adopt the pinned
plan or plan anew, prepare its files if no prepared result verifies, verify
them, and commit against the exact latest version; then trim the WAL up to the
durable watermarks and release the claim. With --all, publish until nothing
sealed is left.` + exitHelp,
		Example: "  walctl publish --table orders\n  walctl wal seal --table orders && walctl publish --table orders --all",
		Args:    cmdutil.ExactArgs(0, "publish takes no arguments (use --table)"),
		RunE:    run(f, opts, runF),
	}
	cmd.Flags().StringVar(&opts.Table, "table", "", "table name")
	cmd.Flags().BoolVar(&opts.All, "all", false, "publish round after round until nothing sealed is pending")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.PublicationKeys...)
	return cmd
}

func run(f *cmdutil.Factory, opts *Options, runF func(context.Context, *Options) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if opts.Table == "" {
			return cmdutil.FlagErrorf("--table is required")
		}
		opts.Logger = f.Logger
		if runF != nil {
			return runF(cmd.Context(), opts)
		}
		return publishRun(cmd.Context(), opts)
	}
}

// deps are the lazy dependencies prepare and publish copy from the factory.
type deps struct {
	Publisher   func(context.Context, coord.Owner, ...coord.AcquireOption) (*corepublish.Publisher, error)
	Owner       func(kind string) coord.Owner
	CallContext func(context.Context) (context.Context, context.CancelFunc)
	Print       func(any, func() *render.Table) error
	Progress    func() *progress.Reporter
	Logger      *slog.Logger
}

func newDeps(f *cmdutil.Factory) deps {
	return deps{Publisher: f.Publisher, Owner: f.Owner, CallContext: f.CallContext, Print: f.Print, Progress: f.Progress}
}

// Summary is the JSON shape of prepare and publish.
type Summary struct {
	Table  string                `json:"table"`
	Epoch  uint64                `json:"epoch"`
	Rounds []*corepublish.Result `json:"rounds"`
}

func publishRun(ctx context.Context, opts *Options) (err error) {
	f := opts.deps
	pub, err := f.Publisher(ctx, f.Owner(coord.OwnerCLI))
	if err != nil {
		return err
	}
	s, err := pub.Acquire(ctx, opts.Table)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := f.CallContext(context.WithoutCancel(ctx))
		defer cancel()
		if rerr := s.Release(rctx); rerr != nil && err == nil {
			f.Logger.Warn("release claim", "table", opts.Table, "err", rerr)
		}
	}()
	sum := Summary{Table: opts.Table, Epoch: s.Epoch(), Rounds: []*corepublish.Result{}}
	prog := f.Progress()
	var rows uint64
	var bytes int64
	for {
		var res *corepublish.Result
		if opts.Prepare {
			res, err = s.Prepare(ctx)
		} else {
			res, err = s.Round(ctx)
		}
		if res != nil {
			sum.Rounds = append(sum.Rounds, res)
		}
		if err != nil {
			return err
		}
		if res.Outcome == corepublish.OutcomePublished || res.Outcome == corepublish.OutcomePrepared {
			rows, bytes = rows+res.Rows, bytes+res.Bytes
			prog.Update(progress.Status{Label: "publishing " + opts.Table, Done: bytes, Bytes: true,
				Extra: fmt.Sprintf("%s rows, version %d", humanize.Comma(int64(rows)), res.Version)})
		}
		if !opts.All || opts.Prepare || res.Outcome == corepublish.OutcomeIdle {
			break
		}
	}
	verb := "published"
	if opts.Prepare {
		verb = "prepared"
	}
	sum.Epoch = s.Epoch() // advanced only once a round found work
	done := fmt.Sprintf("%s %s: %s rows from %s of WAL in %d round(s) at epoch %d", verb, opts.Table,
		humanize.Comma(int64(rows)), humanize.IBytes(uint64(bytes)), len(sum.Rounds), sum.Epoch)
	if last := sum.Rounds[len(sum.Rounds)-1]; last.UnsealedEntries > 0 {
		done += fmt.Sprintf("; %d entries are not sealed yet: run `walctl wal seal --table %s`", last.UnsealedEntries, opts.Table)
	}
	prog.Done(done)
	return f.Print(sum, func() *render.Table {
		t := render.NewTable("table", "outcome", "plan", "adopted", "reused", "files", "rows", "version", "watermarks")
		for _, r := range sum.Rounds {
			t.Add(r.Table, string(r.Outcome), short(r.Plan), fmt.Sprint(r.Adopted), fmt.Sprint(r.Reused), fmt.Sprint(len(r.Files)),
				fmt.Sprint(r.Rows), fmt.Sprint(r.Version), watermarks(r.Watermarks))
		}
		return t
	})
}

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	if id == "" {
		return "-"
	}
	return id
}

func watermarks(w corepublish.Watermarks) string {
	if len(w) == 0 {
		return "-"
	}
	var parts []string
	for s := 0; len(parts) < len(w) && s < 1<<16; s++ {
		if v, ok := w[s]; ok {
			parts = append(parts, fmt.Sprintf("%d:%d", s, v))
		}
	}
	return strings.Join(parts, " ")
}
