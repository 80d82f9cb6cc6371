package table

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
)

// Stops is what `table stopped` and `table resume` need of the
// coordination client.
type Stops interface {
	Stops(ctx context.Context) ([]coord.StopInfo, error)
	Resume(ctx context.Context, req coord.ResumeRequest) (coord.ResumeResult, error)
}

func stopsOf(f *cmdutil.Factory) func(context.Context) (Stops, error) {
	return func(ctx context.Context) (Stops, error) { return f.Coord(ctx) }
}

// StoppedOptions of `walctl table stopped`.
type StoppedOptions struct {
	Stops func(context.Context) (Stops, error)
	Print func(any, func() *render.Table) error
}

// NewCmdStopped returns `table stopped`.
func NewCmdStopped(f *cmdutil.Factory, runF func(context.Context, *StoppedOptions) error) *cobra.Command {
	opts := &StoppedOptions{Stops: stopsOf(f), Print: f.Print}
	return &cobra.Command{
		Use:   "stopped",
		Short: "List the tables a storage failure stopped for the whole fleet",
		Long: `List the tables whose storage failed an fsync in some walctl process. A
failed fsync may have lost what it covered, and a later fsync that succeeds
proves nothing, so that process records a stop in etcd: no worker, one-shot
or catch-up Job claims, fences, commits or trims the table until an operator
has repaired the storage and run 'walctl table resume'.

JSON shape (stable): [{"table", "reason", "owner": {"id", "kind", "host",
"pid"}, "at", "revision"}].`,
		Example: `  walctl table stopped
  walctl table stopped --output json | jq -r '.[].table'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return stoppedRun(cmd.Context(), opts)
		},
	}
}

func stoppedRun(ctx context.Context, opts *StoppedOptions) error {
	c, err := opts.Stops(ctx)
	if err != nil {
		return err
	}
	stops, err := c.Stops(ctx)
	if err != nil {
		return err
	}
	return opts.Print(stops, func() *render.Table {
		t := render.NewTable("table", "since", "by", "revision", "reason")
		for _, s := range stops {
			t.Add(s.Table, s.At.UTC().Format(time.RFC3339), s.Owner.String(), fmt.Sprint(s.Revision), s.Reason)
		}
		return t
	})
}

// ResumeOptions of `walctl table resume`.
type ResumeOptions struct {
	deps
	Stops          func(context.Context) (Stops, error)
	Actor          string
	Table          string
	ExpectRevision int64
	Reason         string
}

// NewCmdResume returns `table resume`.
func NewCmdResume(f *cmdutil.Factory, runF func(context.Context, *ResumeOptions) error) *cobra.Command {
	opts := &ResumeOptions{deps: newDeps(f), Stops: stopsOf(f), Actor: cmdutil.Actor("table resume")}
	cmd := &cobra.Command{
		Use:   "resume --table T --reason TEXT [--expect-revision REV]",
		Short: "Lift a table's storage stop after the storage was repaired (audited)",
		Long: `Lift the fleet-wide stop a failed fsync put on a table ('walctl table
stopped' lists them): in one etcd transaction, delete the stop record and
write an audit record naming you, your reason and the stop as it was
('walctl claim history' lists it). Workers then claim and publish the table
again; the process that met the failure keeps the table stopped until it is
restarted (its page cache may still hold what the disk lost).

Resume only after the storage is repaired or remounted and the table's
latest version reads back ('walctl table read', 'walctl verify'): a version
the failed fsync covered may be gone after a power loss.

With --expect-revision, only the stop record of that revision is lifted
(otherwise exit 4 and nothing changes). A table that is not stopped exits 3.`,
		Example: `  walctl table stopped
  walctl table resume --table orders --expect-revision 8812 --reason "disk replaced, fsck clean, verify ok"`,
		Args: cmdutil.TableArgs("table resume", &opts.Table, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Reason == "" {
				return cmdutil.FlagErrorf("--reason is required: it is kept in the audit record")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return resumeRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Table, "table to resume")
	cmd.Flags().Int64Var(&opts.ExpectRevision, "expect-revision", 0, "lift only the stop record of this revision")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "what was repaired (kept in the audit record)")
	return cmd
}

func resumeRun(ctx context.Context, opts *ResumeOptions) error {
	c, err := opts.Stops(ctx)
	if err != nil {
		return err
	}
	res, err := c.Resume(ctx, coord.ResumeRequest{Table: opts.Table, Actor: opts.Actor, Reason: opts.Reason, ExpectRevision: opts.ExpectRevision})
	if err != nil {
		return err
	}
	if err := opts.Print(res, func() *render.Table {
		t := render.NewTable("table", "stopped since", "by", "audit")
		t.Add(res.Stop.Table, res.Stop.At.UTC().Format(time.RFC3339), res.Stop.Owner.String(), res.AuditKey)
		return t
	}); err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "resumed %s: workers claim and publish it again (the process that met the failure only after a restart)\n", res.Stop.Table)
	return nil
}
