package e2ebench

import (
	"context"
	"fmt"
	"slices"

	"github.com/walctl/walctl/internal/core/errs"
)

// Step is one rate of FindMax: the run's figures without its series.
type Step struct {
	// Share is the target as a share of the dd measured at the step's
	// start.
	Share          float64        `json:"share_of_dd"`
	TargetMiBps    float64        `json:"target_mib_per_s"`
	AckedMiBps     float64        `json:"acked_mib_per_s"`
	PublishedMiBps float64        `json:"published_mib_per_s"`
	DDMiBps        float64        `json:"dd_mib_per_s"`
	Freshness      Percentiles    `json:"freshness"`
	Censored       int64          `json:"freshness_censored"`
	Backlog        BacklogSummary `json:"backlog"`
	Drained        bool           `json:"drained"`
	// Held tells whether the backlog stayed bounded and drained.
	Held bool `json:"held"`
}

// MaxResult is the outcome of FindMax.
type MaxResult struct {
	Steps []Step `json:"steps"`
	// Highest is the last step that held (nil when none did).
	Highest *Step `json:"highest_held"`
}

// FindMax runs Run at each share of dd in shares, in ascending order, each
// for cfg.Duration in a fresh scratch directory (cfg.Rate is ignored), and
// stops after the first step whose backlog did not stay bounded or did not
// drain: the highest ingest rate the pipeline holds lies between the last
// step that held and that one. Cancellation and errors as Run's.
func FindMax(ctx context.Context, cfg Config, shares []float64) (MaxResult, error) {
	return findMax(ctx, cfg, shares, Run)
}

func findMax(ctx context.Context, cfg Config, shares []float64, run func(context.Context, Config) (Result, error)) (res MaxResult, err error) {
	res.Steps = []Step{}
	if len(shares) == 0 {
		return res, fmt.Errorf("no rates to step through: %w", errs.ErrInvalid)
	}
	shares = slices.Sorted(slices.Values(shares))
	held := -1
	defer func() {
		if held >= 0 {
			h := res.Steps[held]
			res.Highest = &h
		}
	}()
	for _, share := range shares {
		if share <= 0 {
			return res, fmt.Errorf("a share of dd must be positive, not %g: %w", share, errs.ErrInvalid)
		}
		c := cfg
		c.Rate, c.RateOfDD = 0, share
		if c.Log != nil {
			fmt.Fprintf(c.Log, "step: %.0f%% of dd\n", share*100)
		}
		r, err := run(ctx, c)
		if err != nil {
			return res, err
		}
		st := Step{Share: share, TargetMiBps: r.TargetMiBps, AckedMiBps: r.AckedMiBps, PublishedMiBps: r.PublishedMiBps,
			DDMiBps: r.DDMiBps, Freshness: r.Freshness, Censored: r.Censored, Backlog: r.Backlog, Drained: r.Drained,
			Held: r.Backlog.Bounded && r.Drained}
		res.Steps = append(res.Steps, st)
		if !st.Held {
			break
		}
		held = len(res.Steps) - 1
	}
	return res, nil
}
