package e2ebench

import (
	"context"
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
)

// FindMax steps up in ascending order and stops after the first step that
// did not hold (backlog grew or did not drain); the highest is the last
// step that held.
func TestFindMaxStopsAtFirstUnheldStep(t *testing.T) {
	var ran []float64
	fake := func(_ context.Context, c Config) (Result, error) {
		ran = append(ran, c.RateOfDD)
		r := Result{TargetMiBps: c.RateOfDD * 100, Drained: true, Backlog: BacklogSummary{Bounded: c.RateOfDD < 0.6}}
		return r, nil
	}
	res, err := findMax(context.Background(), Config{Rate: 1 << 20}, []float64{0.75, 0.25, 0.5, 1}, fake)
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) != 3 || ran[0] != 0.25 || ran[1] != 0.5 || ran[2] != 0.75 {
		t.Fatalf("ran %v, want 0.25 0.5 0.75", ran)
	}
	if len(res.Steps) != 3 || !res.Steps[1].Held || res.Steps[2].Held || res.Highest == nil || res.Highest.Share != 0.5 || res.Highest.TargetMiBps != 50 {
		t.Fatalf("result %+v highest %+v", res.Steps, res.Highest)
	}

	// A step that does not drain does not hold either; none held: no highest.
	undrained := func(_ context.Context, c Config) (Result, error) {
		return Result{Backlog: BacklogSummary{Bounded: true}}, nil
	}
	if res, err := findMax(context.Background(), Config{}, []float64{0.25, 0.5}, undrained); err != nil || len(res.Steps) != 1 || res.Highest != nil {
		t.Fatalf("undrained: %+v %v", res, err)
	}
	if _, err := findMax(context.Background(), Config{}, []float64{0, 0.5}, fake); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("share 0: %v", err)
	}
}
