package catchup

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
)

// Lister is what `catchup list` needs of the catch-up records
// (*corecatchup.Store).
type Lister interface {
	List(ctx context.Context) (corecatchup.List, error)
}

// ListOptions of `walctl catchup list`.
type ListOptions struct {
	Records func(context.Context) (Lister, error)
	Print   func(any, func() *render.Table) error
}

// NewCmdList returns `walctl catchup list`.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{
		Records: func(ctx context.Context) (Lister, error) { return records(ctx, f) },
		Print:   f.Print,
	}
	return &cobra.Command{
		Use:   "list",
		Short: "List every table with a catch-up reservation: its Job, progress and age of last progress",
		Long: `List every table holding a catch-up reservation (or an active catch-up
record), read from etcd in one transaction — no master needs to run: phase,
the Job's name and UID, slot, attempt, commit admission, execution id, progress
sequence, and the age of its last recorded progress (only completed batches
and commits count as progress, never heartbeats).

JSON (--output json, stable): {"revision", "observed_at", "slots_used",
"reservations": [{"table", "phase", "job_id", "job_uid", "slot", "attempt",
"admitted_at", "admission_open", "exec_id", "seq", "last_progress_at",
"last_progress_age_seconds", "termination_requested"}]}, sorted by table; a
field is null when not known yet (no Job created, no progress recorded).

EXIT STATUS
  0    listed (also when there is no reservation)
  5    etcd is unavailable
  6    a record of a kind or version this binary does not know (fails closed)`,
		Example: "  walctl catchup list\n  walctl catchup list --output json | jq '.reservations[] | select(.last_progress_age_seconds > 600)'",
		Args:    cmdutil.ExactArgs(0, "catchup list takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *ListOptions) error {
	s, err := opts.Records(ctx)
	if err != nil {
		return err
	}
	l, err := s.List(ctx)
	if err != nil {
		return err
	}
	return opts.Print(l, func() *render.Table {
		t := render.NewTable("table", "phase", "job", "slot", "attempt", "admission", "exec", "seq", "last progress")
		for _, e := range l.Reservations {
			t.Add(e.Table, string(e.Phase), str(e.JobID), str(e.Slot), str(e.Attempt), admissionWord(e.AdmissionOpen),
				str(e.ExecID), str(e.Seq), ago(e.LastProgressAge))
		}
		return t
	})
}

func admissionWord(open *bool) string {
	switch {
	case open == nil:
		return "-"
	case *open:
		return "open"
	}
	return "closed"
}

// ago renders an age in seconds as "1m30s ago", "-" when unknown.
func ago(secs *float64) string {
	if secs == nil {
		return "-"
	}
	return fmt.Sprintf("%s ago", (time.Duration(*secs * float64(time.Second))).Round(time.Second))
}
