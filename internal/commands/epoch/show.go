// Package epoch implements `walctl epoch`.
package epoch

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
)

// NewCmdEpoch returns the `epoch` command group.
func NewCmdEpoch(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "epoch <command>",
		Short: "Inspect publisher epochs (the fencing tokens)",
	}
	cmd.AddCommand(NewCmdShow(f, nil))
	return cmd
}

// ShowOptions of `walctl epoch show`.
type ShowOptions struct {
	WAL         func(context.Context) (wal.Log, error)
	Claims      func(context.Context) (Claims, error)
	CallContext func(context.Context) (context.Context, context.CancelFunc)
	Print       func(any, func() *render.Table) error
	LanceRoot   string
	Store       objstore.Store
	Table       string
}

// Claims is what epoch show reads of the coordination client.
type Claims interface {
	Get(ctx context.Context, table string) (coord.ClaimInfo, error)
}

// Row is one table in the output of `epoch show`. ClaimEpoch and
// FenceEpoch are null when there is no claim or no Lance table yet.
type Row struct {
	Table      string  `json:"table"`
	WALEpoch   uint64  `json:"wal_epoch"`
	ClaimEpoch *uint64 `json:"claim_epoch"`
	ClaimOwner string  `json:"claim_owner,omitempty"`
	FenceEpoch *uint64 `json:"fence_epoch"`
	Version    uint64  `json:"version,omitempty"`
	Verdict    string  `json:"verdict"`
	OK         bool    `json:"ok"`
}

// NewCmdShow returns `epoch show`.
func NewCmdShow(f *cmdutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{WAL: f.WAL, CallContext: f.CallContext, Print: f.Print,
		Claims: func(ctx context.Context) (Claims, error) { return f.Coord(ctx) }}
	cmd := &cobra.Command{
		Use:   "show [--table T]",
		Short: "Compare the WAL publisher epoch, the claim's epoch and the table's fence, per table",
		Long: `For one table (or every table) show the three places an epoch lives and a
verdict: the publisher epoch held durably in the WAL (advanced by CAS when a
publisher takes over), the epoch recorded in the current claim in etcd, and the
epoch of the last fence in the table's latest Lance version. Every commit is
checked against the table's own fence, so a holder behind the WAL epoch can no
longer publish.`,
		Example: "  walctl epoch show\n  walctl epoch show --table orders --output json",
		Args:    cmdutil.TableArgs("epoch show", &opts.Table, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.LanceRoot = f.Global().LanceRoot
			var err error
			if opts.Store, err = f.LanceStore(cmd.Context()); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return showRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Table, "only this table")
	return cmd
}

func showRun(ctx context.Context, opts *ShowOptions) error {
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	names := []string{opts.Table}
	if opts.Table == "" {
		cctx, cancel := opts.CallContext(ctx)
		infos, err := log.Tables(cctx)
		cancel()
		if err != nil {
			return err
		}
		names = names[:0]
		for _, i := range infos {
			names = append(names, i.Name)
		}
	}
	rows := []Row{}
	for _, n := range names {
		cctx, cancel := opts.CallContext(ctx)
		e, err := log.Epoch(cctx, n)
		cancel()
		if err != nil {
			return err
		}
		row := Row{Table: n, WALEpoch: e}
		if err := fill(ctx, opts, &row); err != nil {
			return err
		}
		rows = append(rows, row)
	}
	return opts.Print(rows, func() *render.Table {
		t := render.NewTable("table", "wal epoch", "claim epoch", "fence epoch", "version", "ok", "verdict")
		t.Status = 5
		for _, r := range rows {
			ok := "ok"
			if !r.OK {
				ok = "fail"
			}
			t.Add(r.Table, fmt.Sprint(r.WALEpoch), opt(r.ClaimEpoch), opt(r.FenceEpoch), fmt.Sprint(r.Version), ok, r.Verdict)
		}
		return t
	})
}

func fill(ctx context.Context, opts *ShowOptions, r *Row) error {
	co, err := opts.Claims(ctx)
	if err != nil {
		return err
	}
	c, err := co.Get(ctx, r.Table)
	switch {
	case err == nil:
		r.ClaimEpoch, r.ClaimOwner = &c.Epoch, c.Owner.ID
	case !errors.Is(err, coord.ErrNoClaim):
		return err
	}
	rd, err := publish.OpenReaderOn(cmdutil.RootStore(opts.Store, opts.LanceRoot), r.Table, publish.Selection{})
	switch {
	case err == nil:
		r.FenceEpoch, r.Version = &rd.State.Epoch, rd.Manifest.Version
	case !errors.Is(err, lance.ErrDatasetNotFound):
		return err
	}
	r.Verdict, r.OK = verdict(r.WALEpoch, r.ClaimEpoch, r.FenceEpoch)
	return nil
}

// verdict explains how the three epochs relate.
func verdict(w uint64, claim, fence *uint64) (string, bool) {
	f := uint64(0)
	if fence != nil {
		f = *fence
	}
	switch {
	case f > w:
		return fmt.Sprintf("the table is fenced at %d, above the WAL epoch %d: the WAL's epoch went back (restored?); publishing is refused until it is repaired", f, w), false
	case claim == nil && f == w:
		return fmt.Sprintf("unclaimed and consistent; the next claimant advances to %d and fences", w+1), true
	case claim == nil:
		return fmt.Sprintf("unclaimed; epoch %d was taken but not fenced (its holder stopped first); the next claimant fences", w), true
	case *claim == 0:
		// Rule 3 in progress: the holder records its epoch only after the
		// WAL CAS, so 0 is "not yet", not "older than the WAL".
		return fmt.Sprintf("held; the holder is taking over and has not recorded its epoch yet (WAL at %d, fenced at %d): it records its advanced WAL epoch in the claim, then fences", w, f), true
	case *claim == w && f == w:
		return "held and fenced: the claim holder is the table's publisher", true
	case *claim == w:
		return fmt.Sprintf("held; the holder advanced the epoch to %d and has not fenced yet", w), true
	case *claim < w:
		return fmt.Sprintf("the claim records %d but the WAL is at %d: a newer publisher exists and this holder can no longer commit", *claim, w), true
	}
	return fmt.Sprintf("the claim records %d, above the WAL epoch %d: inconsistent", *claim, w), false
}

func opt(v *uint64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
