package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Every worker setting reaches the core configuration with its type, from
// flags and from the environment.
func TestRunSettings(t *testing.T) {
	t.Setenv("WALCTL_WORKER_POLL_INTERVAL", "250ms")
	o, f, err := cmdtest.Parse(t, NewCmdRun, []string{"--tables", "a,b", "--max-tables", "1", "--slice-duration", "1m",
		"--idle-release-rounds", "3", "--memory-budget", "64MiB", "--claim-ttl", "9s", "--wal-generation-age", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if strings.Join(c.Tables, ",") != "a,b" || c.MaxConcurrentTables != 1 || c.PollInterval != 250*time.Millisecond ||
		c.Slice.MaxDuration != time.Minute || c.IdleRelease.MaxRounds != 3 {
		t.Fatalf("config %+v", c)
	}
	if f.Config.Int64(cmdutil.KeyMemoryBudget) != 64<<20 || f.Config.Duration(cmdutil.KeyClaimTTL) != 9*time.Second ||
		f.Config.Duration(cmdutil.KeyWALMaxGenerationAge) != 2*time.Second {
		t.Fatal("publication or WAL settings lost")
	}
}

// A malformed setting is a usage error naming the key, source and value,
// never a silent zero.
func TestRunRefusesBadSettings(t *testing.T) {
	t.Setenv("WALCTL_WORKER_POLL_INTERVAL", "banana")
	_, _, err := cmdtest.Parse(t, NewCmdRun, []string{"--tables", "a"})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `worker.poll_interval: invalid value "banana" from env WALCTL_WORKER_POLL_INTERVAL`) {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("WALCTL_WORKER_POLL_INTERVAL", "")
	if _, _, err := cmdtest.Parse(t, NewCmdRun, nil); !cmdutil.IsFlagError(err) {
		t.Fatalf("no tables: %v", err)
	}
}

func testOptions() *Options {
	return &Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: func(string) coord.Owner { return coord.Owner{ID: "t"} }}
}

// runRun stops at the first dependency that is unavailable and returns its
// error, and refuses a metrics address it cannot bind.
func TestRunRunDependencies(t *testing.T) {
	down := errors.New("wal down")
	opts := testOptions()
	opts.WAL = func(context.Context) (wal.Log, error) { return nil, down }
	if err := runRun(context.Background(), opts); !errors.Is(err, down) {
		t.Fatalf("err = %v", err)
	}
	opts.MetricsListen = "256.0.0.1:0"
	if err := runRun(context.Background(), opts); !cmdutil.IsFlagError(err) {
		t.Fatalf("bad metrics address: %v", err)
	}
}
