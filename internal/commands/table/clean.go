package table

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corepublish "github.com/walctl/walctl/internal/core/publish"
)

// CleanOptions of `walctl table clean`.
type CleanOptions struct {
	deps
	claimedDeps
	Name      string
	OlderThan time.Duration
}

// NewCmdClean returns `table clean`.
func NewCmdClean(f *cmdutil.Factory, runF func(context.Context, *CleanOptions) error) *cobra.Command {
	opts := &CleanOptions{deps: newDeps(f), claimedDeps: newClaimedDeps(f), OlderThan: 7 * 24 * time.Hour}
	cmd := &cobra.Command{
		Use:   "clean --table T [--older-than D]",
		Short: "Remove old versions and the files no retained version references",
		Long: `Under the table's claim, first fence the table (a new publisher epoch and a
fence version), so a deposed worker, publish or compact whose checks passed
before can no longer commit; then remove the oldest versions committed more
than --older-than ago, oldest first up to the first version that stays, and
never the latest two (the fence and its parent); then the data and deletion
files older than that which no retained version references, and walctl's
records that are no longer needed: retired plans, descriptor sets of retired
plans none of whose files is referenced (directly or through a kept
compaction), compaction records of files no longer referenced. The files of
a pinned plan's prepared attempts and walctl's WAL digests (what 'verify'
compares trimmed positions with) are always kept. On an S3 lance root it
first aborts the multipart uploads that dead attempts left open under data/
(all of them, as any new owner's fence does): the store keeps, and bills,
their parts until they are aborted. Works on local and S3 lance roots.

A version number is never used twice: nothing younger than twice the claim
TTL (--claim-ttl, which must be the fleet's) is removed, because a deposed
holder could still commit onto it or reference it. A smaller --older-than
(0s included) is raised to that minimum, said on stderr, and reported as
min_age_ns; the cutoff is now minus the larger of the two.

JSON shape (stable): {"table", "epoch", "min_age_ns", "cutoff",
"versions_removed": [N], "versions_kept", "files_removed": [path],
"records_removed": [key], "uploads_aborted": [key]}.
` + claimedHelp,
		Example: `  walctl table clean --table orders --older-than 168h
  walctl table clean --table orders --older-than 1h --output json | jq '.files_removed | length'`,
		Args: cmdutil.TableArgs("table clean", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Logger = f.Logger
			if opts.OlderThan < 0 {
				return cmdutil.FlagErrorf("--older-than must not be negative")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return cleanRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	cmd.Flags().DurationVar(&opts.OlderThan, "older-than", opts.OlderThan, "remove only what is older than this (at least twice the claim TTL)")
	return cmd
}

func cleanRun(ctx context.Context, opts *CleanOptions) error {
	return withClaim(ctx, opts.deps, opts.claimedDeps, opts.Name, func(s *corepublish.Session) error {
		res, err := s.Clean(ctx, opts.OlderThan)
		if err != nil {
			return err
		}
		if opts.OlderThan < res.MinAge {
			fmt.Fprintf(opts.ErrOut, "--older-than %s is below twice the claim TTL: nothing younger than %s was removed\n", opts.OlderThan, res.MinAge)
		}
		return opts.Print(res, func() *render.Table {
			t := render.NewTable("removed", "what")
			for _, v := range res.VersionsRemoved {
				t.Add("version", fmt.Sprint(v))
			}
			for _, f := range res.FilesRemoved {
				t.Add("file", f)
			}
			for _, r := range res.RecordsRemoved {
				t.Add("record", r)
			}
			for _, u := range res.UploadsAborted {
				t.Add("upload", u)
			}
			fmt.Fprintf(opts.ErrOut, "cleaned %s: %d version(s), %d file(s), %d record(s) removed, %d upload(s) aborted; %d version(s) kept\n",
				res.Table, len(res.VersionsRemoved), len(res.FilesRemoved), len(res.RecordsRemoved), len(res.UploadsAborted), res.VersionsKept)
			return t
		})
	})
}
