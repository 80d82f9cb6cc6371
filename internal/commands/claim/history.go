package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
)

// HistoryOptions of `walctl claim history`.
type HistoryOptions struct {
	deps
	Table string
	Limit int
}

// NewCmdHistory returns `claim history`.
func NewCmdHistory(f *cmdutil.Factory, runF func(context.Context, *HistoryOptions) error) *cobra.Command {
	opts := &HistoryOptions{deps: newDeps(f)}
	cmd := &cobra.Command{
		Use:   "history [--table T] [--limit N]",
		Short: "List the audit records of claim revocations, oldest first",
		Long: `List the audit records 'walctl claim revoke' writes in the same etcd
transaction as the revocation: when, which table, who (the actor), why, and the
claim as it was (owner, epoch, CreateRevision). Read linearizably; nothing is
written. With --limit, only the newest N records.

JSON (--output json): a list of {"key", "action", "table", "actor", "reason",
"at", "claim"}.`,
		Example: "  walctl claim history\n  walctl claim history --table orders --output json | jq '.[].actor'",
		Args:    cmdutil.ExactArgs(0, "claim history takes no arguments (use --table)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Limit < 0 {
				return cmdutil.FlagErrorf("--limit must not be negative")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Table, "only this table")
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "only the newest N records (0: all)")
	return cmd
}

func historyRun(ctx context.Context, opts *HistoryOptions) error {
	co, err := opts.Coord(ctx)
	if err != nil {
		return err
	}
	recs, err := co.Audit(ctx, opts.Table)
	if err != nil {
		return err
	}
	if opts.Limit > 0 && len(recs) > opts.Limit {
		recs = recs[len(recs)-opts.Limit:]
	}
	return opts.Print(recs, func() *render.Table {
		t := render.NewTable("at", "action", "table", "actor", "owner", "epoch", "revision", "reason")
		for _, r := range recs {
			t.Add(r.At.UTC().Format(time.RFC3339), r.Action, r.Table, r.Actor, r.Claim.Owner.ID, fmt.Sprint(r.Claim.Epoch),
				fmt.Sprint(r.Claim.CreateRevision), r.Reason)
		}
		return t
	})
}
