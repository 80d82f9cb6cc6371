package catchup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/executor"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	coremaster "github.com/walctl/walctl/internal/core/master"
	"github.com/walctl/walctl/internal/core/publish"
)

const clientExitHelp = `
EXIT STATUS
  0    answered (for submit: reserved, awaiting handover or already active; with
       --dry-run any decision)
  2    refused as invalid input (a bad name, a refused field) or a missing or wrong
       token (HTTP 400, 401, 413)
  3    unknown target, or (cancel) no active catch-up (HTTP 404)
  4    conflict: (cancel) progress advanced since it was observed, try again; or
       the Job already finished by itself, and its outcome stands (409)
  5    the master (or its etcd) is unavailable
  10   submit: the master refused the admission (disabled, not owned, no or stale
       statistics, below threshold, cooling down, capacity exhausted)`

// NewCmdCatchup returns the `catchup` command group.
func NewCmdCatchup(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catchup <command>",
		Short: "Catch up a table's WAL backlog: the executor and the master API's clients",
		Long: `Catch-up moves a large WAL backlog of one table with a dedicated executor (a
Kubernetes Job, or a child process of the master on the embedded default). The
master admits it (from its backlog scan or 'catchup submit'); 'catchup run' is
what the Job runs. submit, status and cancel talk to the master API at --master
(master.url; default: the master serving this data dir) with the bearer token
from WALCTL_MASTER_TOKEN or master.token (a follower of several masters
sends them to the leader). 'catchup list' reads every reservation from etcd;
'catchup policy' shows and changes the policy stored in etcd.`,
	}
	cmd.AddCommand(NewCmdRun(f, nil), NewCmdSubmit(f, nil), NewCmdStatus(f, nil), NewCmdCancel(f, nil), NewCmdList(f, nil), NewCmdPolicy(f))
	return cmd
}

// API is what the client verbs need of the master (coremaster.Client).
type API interface {
	Submit(ctx context.Context, req coremaster.SubmitRequest) (corecatchup.Admission, error)
	Status(ctx context.Context, table string) (corecatchup.Status, error)
	Cancel(ctx context.Context, req coremaster.CancelRequest) (corecatchup.Status, error)
}

// PolicyStore is what the policy verbs need of the catch-up records
// (*corecatchup.Store).
type PolicyStore interface {
	LoadPolicy(ctx context.Context) (corecatchup.StoredPolicy, error)
	SetPolicy(ctx context.Context, ch corecatchup.PolicyChange) (corecatchup.PolicyChangeResult, error)
}

// deps are the lazy dependencies the catch-up client verbs copy from the
// factory.
type deps struct {
	Master   func() (API, error)
	Policies func(context.Context) (PolicyStore, error)
	Print    func(any, func() *render.Table) error
}

func newDeps(f *cmdutil.Factory) deps {
	return deps{
		Master: func() (API, error) {
			base := strings.TrimSpace(f.Config.String(KeyMasterURL))
			if base == "" {
				var err error
				if base, err = coremaster.ReadEndpoint(f.Config.Global.DataDir); err != nil {
					return nil, err
				}
			}
			c, err := coremaster.NewClient(base, f.Config.String(KeyMasterToken), f.Timeout())
			if errors.Is(err, errs.ErrInvalid) {
				return nil, cmdutil.FlagErrorWrap(fmt.Errorf("--master: %w", err))
			}
			return c, err
		},
		Policies: func(ctx context.Context) (PolicyStore, error) { return records(ctx, f) },
		Print:    f.Print,
	}
}

// records opens the catch-up records on the configured etcd.
func records(ctx context.Context, f *cmdutil.Factory) (*corecatchup.Store, error) {
	co, err := f.Coord(ctx)
	if err != nil {
		return nil, err
	}
	return corecatchup.NewStore(co, corecatchup.StoreOptions{CallTimeout: f.Timeout()}), nil
}

// newRunOptions wires the lazy dependencies from the factory.
func newRunOptions(f *cmdutil.Factory) *RunOptions {
	return &RunOptions{
		Admission: func(ctx context.Context) (executor.Admission, error) { return records(ctx, f) },
		WAL:       func(ctx context.Context) (executor.Sealed, error) { return f.WAL(ctx) },
		Publisher: func(ctx context.Context, opts *RunOptions, guard func(context.Context, string) error, execution func() string) (executor.Acquirer, error) {
			owner := f.Owner(coord.OwnerCatchup)
			owner.JobID = opts.JobID
			pub, err := f.PublisherWith(ctx, owner, func(pc *publish.Config) {
				pc.Limits.MaxBytes, pc.Limits.MaxGenerations = opts.BatchBytes, opts.BatchGenerations
				pc.Limits.FileBytes = min(pc.Limits.FileBytes, opts.BatchBytes)
				pc.Budget, pc.Cache = opts.Memory.Budget, opts.Memory.Cache
				pc.CommitGuard, pc.Execution = guard, execution
			})
			if err != nil {
				return nil, err
			}
			return executor.PublisherAcquirer(pub), nil
		},
		Progress: f.Progress,
		Print:    f.Print,
	}
}
