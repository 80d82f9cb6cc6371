package executor

import (
	"context"

	"github.com/walctl/walctl/internal/core/publish"
)

// Acquirer takes a table for an execution (*publish.Publisher satisfies it
// through PublisherAcquirer).
type Acquirer interface {
	Acquire(ctx context.Context, table string) (Session, error)
}

// PublisherFunc builds the publisher of an execution around guard, the
// executor's commit guard (publish.Config.CommitGuard), and execution, the
// id of the running execution (publish.Config.Execution, recorded with each
// commit): the caller sets the executor's batch limits and merge budget on it.
type PublisherFunc func(guard func(ctx context.Context, table string) error, execution func() string) (Acquirer, error)

// Execute is `walctl catchup run`: it builds the executor, lets
// newPublisher build the publisher around the executor's commit guard,
// takes the table with exactly cfg.JobID's identity and runs (see Run). The
// report is returned whatever the outcome: a table that cannot be taken is
// reported with its classified outcome (fenced when another holder has it)
// and the error. Errors before anything ran (an invalid cfg, a publisher
// that cannot be built) return a nil report.
func Execute(ctx context.Context, cfg Config, adm Admission, src Sealed, newPublisher PublisherFunc) (*Report, error) {
	ex, err := New(cfg, adm)
	if err != nil {
		return nil, err
	}
	pub, err := newPublisher(ex.Guard, ex.Execution)
	if err != nil {
		return nil, err
	}
	s, err := pub.Acquire(ctx, cfg.Table)
	if err != nil {
		return &Report{Table: cfg.Table, JobID: cfg.JobID, Outcome: Classify(err, OutcomeFailed), Target: publish.Watermarks{},
			Watermarks: publish.Watermarks{}, Batches: []Batch{}, Error: err.Error()}, err
	}
	return ex.Run(ctx, s, src)
}

// PublisherAcquirer adapts a *publish.Publisher, whose Acquire returns the
// concrete session, to Acquirer.
func PublisherAcquirer(p *publish.Publisher) Acquirer { return publisherAcquirer{p} }

type publisherAcquirer struct{ p *publish.Publisher }

func (a publisherAcquirer) Acquire(ctx context.Context, table string) (Session, error) {
	s, err := a.p.Acquire(ctx, table)
	if err != nil {
		return nil, err
	}
	return s, nil
}
