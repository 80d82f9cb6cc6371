package backlog

import (
	"context"
	"errors"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/wal"
)

func TestScanRunStopsOnWALError(t *testing.T) {
	down := errors.New("wal down")
	opts := &ScanOptions{WAL: func(context.Context) (wal.Log, error) { return nil, down }}
	if err := scanRun(context.Background(), opts); !errors.Is(err, down) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdScan, []string{"x"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("an argument: %v", err)
	}
}
