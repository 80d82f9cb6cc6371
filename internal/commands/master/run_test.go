package master

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/catchuptest"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	coremaster "github.com/walctl/walctl/internal/core/master"
	"github.com/walctl/walctl/internal/core/wal"
)

func TestRunFlags(t *testing.T) {
	if _, _, err := cmdtest.Parse(t, NewCmdRun, nil); !cmdutil.IsFlagError(err) {
		t.Fatalf("no token: %v, want a usage error", err)
	}
	t.Setenv("WALCTL_MASTER_TOKEN", "s3cret")
	if _, _, err := cmdtest.Parse(t, NewCmdRun, []string{"--runner", "podman"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("unknown runner: %v, want a usage error", err)
	}
	opts, _, err := cmdtest.Parse(t, NewCmdRun, []string{"--enabled", "--owned-targets", "b,a", "--listen", "127.0.0.1:0", "--shutdown-grace", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Policy.Enabled || len(opts.Policy.OwnedTargets) != 2 || opts.Listen != "127.0.0.1:0" || opts.Token != "s3cret" || opts.Grace != 3*time.Second {
		t.Fatalf("options %+v", opts)
	}
}

// fakeWAL knows one table with no backlog.
type fakeWAL struct{}

func (fakeWAL) Table(_ context.Context, name string) (wal.TableInfo, error) {
	if name != "orders" {
		return wal.TableInfo{}, fmt.Errorf("table %s: %w", name, wal.ErrUnknownTable)
	}
	return wal.TableInfo{Name: name}, nil
}
func (fakeWAL) Tables(context.Context) ([]wal.TableInfo, error) {
	return []wal.TableInfo{{Name: "orders"}}, nil
}
func (fakeWAL) Stats(context.Context, string, map[int]uint64) (wal.TableStats, error) {
	return wal.TableStats{Table: "orders"}, nil
}

// runRun serves the master on a real etcd until cancelled: the endpoint
// file names a URL that answers the API, and is gone afterwards.
func TestRunRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dataDir := t.TempDir()
	opts := &Options{
		WAL: func(context.Context) (coremaster.WAL, error) { return fakeWAL{}, nil },
		Store: func(ctx context.Context) (*catchup.Store, error) {
			co, err := coord.Connect(ctx, coord.Config{Endpoints: []string{srv.Endpoint()}})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { co.Close() })
			return catchup.NewStore(co, catchup.StoreOptions{}), nil
		},
		NewRunner: func(context.Context, catchup.Policy) (catchup.Runner, error) { return catchuptest.NewFakeRunner(), nil },
		Logger:    slog.New(slog.DiscardHandler), Policy: catchup.Policy{Enabled: true, OwnedTargets: []string{"orders"}},
		LanceRoot: t.TempDir(), DataDir: dataDir, Listen: "127.0.0.1:0", Token: "tok",
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runRun(runCtx, opts) }()
	var url string
	for url == "" {
		select {
		case err := <-done:
			t.Fatalf("runRun ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		url, _ = coremaster.ReadEndpoint(dataDir)
	}
	c, err := coremaster.NewClient(url, "tok", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx, "orders"); err != nil || st.Target != "orders" || st.Active {
		t.Fatalf("status through the master: %+v, %v", st, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(coremaster.EndpointFile(dataDir)); !os.IsNotExist(err) {
		t.Fatalf("endpoint file left behind: %v", err)
	}
}
