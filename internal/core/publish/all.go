package publish

import (
	"context"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
)

// All claims table, publishes round after round until a round finds nothing
// sealed above the watermarks (OutcomeIdle), and releases the claim. It
// calls onRound (when not nil) after each round and returns every round's
// result with the session's epoch. A round that is neither published nor
// idle (another holder took over) is errs.ErrConflict. On cancellation the
// round in progress stops as Round documents and the claim is released.
// The release's error is returned only when publication itself succeeded.
func (p *Publisher) All(ctx context.Context, table string, onRound func(*Result)) (epoch uint64, results []*Result, err error) {
	s, err := p.Acquire(ctx, table)
	if err != nil {
		return 0, nil, err
	}
	defer func() {
		if rerr := s.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	for {
		res, err := s.Round(ctx)
		if res != nil {
			results = append(results, res)
			if onRound != nil {
				onRound(res)
			}
		}
		if err != nil {
			return s.Epoch(), results, err
		}
		switch res.Outcome {
		case OutcomeIdle:
			return s.Epoch(), results, nil
		case OutcomePublished:
		default:
			return s.Epoch(), results, fmt.Errorf("table %s round %d: outcome %s: %w", table, len(results), res.Outcome, errs.ErrConflict)
		}
	}
}
