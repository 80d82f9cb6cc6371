package verify

import (
	"context"
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

func parse(t *testing.T, args []string) (*Options, error) {
	t.Helper()
	o, _, err := cmdtest.Parse(t, NewCmdVerify, args)
	return o, err
}

func TestVerifyFlags(t *testing.T) {
	o, err := parse(t, []string{"--table", "orders", "--version", "7"})
	if err != nil || o.Table != "orders" || o.Version != 7 {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := parse(t, nil); !cmdutil.IsFlagError(err) {
		t.Fatalf("no --table: %v", err)
	}
	if _, err := parse(t, []string{"orders"}); err == nil {
		t.Fatal("a positional argument was accepted")
	}
}

type fakeWAL struct{ wal.Log }

func (fakeWAL) Table(_ context.Context, name string) (wal.TableInfo, error) {
	return wal.TableInfo{}, wal.ErrUnknownTable
}

// An unknown table is exit 3 before anything is read.
func TestVerifyRunUnknownTable(t *testing.T) {
	opts := &Options{Table: "nope", WAL: func(context.Context) (wal.Log, error) { return fakeWAL{}, nil },
		CallContext: func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) },
		Print:       func(any, func() *render.Table) error { t.Fatal("printed"); return nil }}
	if err := verifyRun(context.Background(), opts); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}
