package master

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/catchuptest"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/wal"
)

// fakeWAL knows one table with no backlog.
type fakeWAL struct{ fakeTables }

func (fakeWAL) Tables(context.Context) ([]wal.TableInfo, error) {
	return []wal.TableInfo{{Name: "orders"}}, nil
}

func (fakeWAL) Stats(context.Context, string, map[int]uint64) (wal.TableStats, error) {
	return wal.TableStats{Table: "orders"}, nil
}

func noWatermarks(context.Context, string) (map[int]uint64, error) { return map[int]uint64{}, nil }

// Run serves the API (reachable through Client), publishes its URL in the
// endpoint file while it runs, refuses a policy other than the stored one
// before serving anything, and returns nil once ctx ends.
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	co, err := coord.Connect(ctx, coord.Config{Endpoints: []string{srv.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	p := catchup.DefaultPolicy()
	p.Enabled, p.OwnedTargets = true, []string{"orders"}
	endpoint := filepath.Join(t.TempDir(), "master", "ENDPOINT")
	cfg := RunConfig{Store: catchup.NewStore(co, catchup.StoreOptions{}), Policy: p,
		NewRunner: func(catchup.Policy) (catchup.Runner, error) { return catchuptest.NewFakeRunner(), nil },
		WAL:       fakeWAL{fakeTables{"orders": true}}, Watermarks: noWatermarks, Listen: "127.0.0.1:0",
		EndpointFile: endpoint, Token: "tok", Logger: slog.New(slog.DiscardHandler)}

	runCtx, stop := context.WithCancel(ctx)
	urls := make(chan string, 1)
	cfg.Started = func(u string) { urls <- u }
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg) }()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	}
	if b, err := os.ReadFile(endpoint); err != nil || string(b) != url+"\n" {
		t.Fatalf("endpoint file %q, %v; want %s", b, err, url)
	}
	c, err := NewClient(url, "tok", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The leader's first scan may or may not have stored statistics yet
	// (an empty backlog): either answer is the admission path's.
	if a, err := c.Submit(ctx, SubmitRequest{Target: "orders", DryRun: true}); err != nil ||
		(a.Decision != catchup.DecisionNoStats && a.Decision != catchup.DecisionBelowThreshold) {
		t.Fatalf("submit through the running master: %+v, %v", a, err)
	}

	other := cfg
	other.Policy.OwnedTargets = []string{"orders", "more"}
	other.EndpointFile, other.Started = filepath.Join(t.TempDir(), "ENDPOINT"), nil
	if err := Run(ctx, other); !errors.Is(err, catchup.ErrPolicyMismatch) {
		t.Fatalf("a master with another policy: %v, want ErrPolicyMismatch", err)
	}
	if _, err := os.Stat(other.EndpointFile); !os.IsNotExist(err) {
		t.Fatalf("a refused master published an endpoint: %v", err)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancellation: %v", err)
	}
	if _, err := os.Stat(endpoint); !os.IsNotExist(err) {
		t.Fatalf("endpoint file left behind: %v", err)
	}
}
