package watermarks

import (
	"context"
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
)

func TestMissingDatasetHasNoWatermarks(t *testing.T) {
	wm, err := FromLance(t.TempDir())(context.Background(), "t1")
	if err != nil || len(wm) != 0 {
		t.Fatalf("watermarks %v, %v; want none", wm, err)
	}
	if _, err := FromLance(t.TempDir())(context.Background(), "../x"); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("bad name: %v, want ErrInvalid", err)
	}
}
