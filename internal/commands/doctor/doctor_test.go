package doctor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/health"
	"github.com/walctl/walctl/internal/core/wal"
)

type fakeLog struct{ wal.Log }

func (fakeLog) Tables(context.Context) ([]wal.TableInfo, error) { return []wal.TableInfo{}, nil }

func options(open func(context.Context) (wal.Log, error), printed *any) *Options {
	return &Options{
		WALTarget: "127.0.0.1:1",
		LanceRoot: "",
		CallContext: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Second)
		},
		WAL:   open,
		Print: func(v any, _ func() *render.Table) error { *printed = v; return nil },
	}
}

// The WAL is one of doctor's checks: unreachable, it fails with exit 5's
// category; reachable, it is ok.
func TestWALChecks(t *testing.T) {
	var printed any
	down := options(func(context.Context) (wal.Log, error) { return nil, errors.New("connection refused") }, &printed)
	cs := walChecks(context.Background(), down)
	if len(cs) != 1 || cs[0].Name != "wal" || cs[0].Status != health.Fail || !errors.Is(health.Failed(cs), errs.ErrUnavailable) {
		t.Fatalf("%+v", cs)
	}
	up := options(func(context.Context) (wal.Log, error) { return fakeLog{}, nil }, &printed)
	if cs := walChecks(context.Background(), up); len(cs) != 1 || cs[0].Status != health.OK {
		t.Fatalf("%+v", cs)
	}
}
