package coord

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/testutil/metrics"
)

// One real embedded etcd serves the whole package (start-up is the costly
// part). Tests are sequential (no t.Parallel): the busy-hint test measures
// server-wide metrics and needs the server otherwise idle, so every test
// releases its claims and closes its clients.
var srv *etcdembed.Server

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEtcdEnv); dir != "" {
		runChildEtcd(dir)
		return
	}
	if spec := os.Getenv(childHolderEnv); spec != "" {
		runChildHolder(spec)
		return
	}
	dir, err := os.MkdirTemp("", "coord-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv, err = etcdembed.Start(ctx, etcdembed.Options{Dir: dir, MetricsAddr: "127.0.0.1:0"})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded etcd:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

var prefixSeq atomic.Int64

// newClient connects a Client (its own etcd connection, like a separate
// process) under a key prefix unique to the test.
func newClient(t *testing.T, prefix string, cfg Config) *Client {
	t.Helper()
	if cfg.Endpoints == nil {
		cfg.Endpoints = []string{srv.Endpoint()}
	}
	cfg.Prefix = prefix
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testPrefix(t *testing.T) string {
	return fmt.Sprintf("/test/%d-%s", prefixSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "_"))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func worker(id string) Owner {
	return Owner{ID: id, Kind: OwnerWorker, Host: "test", PID: os.Getpid()}
}

// release releases a claim at test end, whatever happened to it.
func release(t *testing.T, cl *Claim) {
	t.Cleanup(func() { _ = cl.Release(context.Background()) })
}

func waitDone(t *testing.T, cl *Claim, within time.Duration) {
	t.Helper()
	select {
	case <-cl.Done():
	case <-time.After(within):
		t.Fatalf("claim on %s still held after %s", cl.Table(), within)
	}
}

func leases(t *testing.T, cli *clientv3.Client) map[clientv3.LeaseID]bool {
	t.Helper()
	resp, err := cli.Leases(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[clientv3.LeaseID]bool{}
	for _, l := range resp.Leases {
		out[l.ID] = true
	}
	return out
}

// scrape reads etcd's own Prometheus endpoint.
func scrape(t *testing.T) metrics.Metrics { return metrics.MustScrape(t, srv.MetricsURL()) }

const childEtcdEnv = "COORD_TEST_CHILD_ETCD_DIR"

// runChildEtcd is the body of a child test process that serves an embedded
// etcd, so that a test can kill etcd for real (SIGKILL) instead of shutting
// it down gracefully. It prints the endpoint and serves until stdin closes.
func runChildEtcd(dir string) {
	s, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(s.Endpoint())
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Close()
	os.Exit(0)
}

// startChildEtcd starts an etcd in a child process and returns its endpoint
// and the process.
func startChildEtcd(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEtcdEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child etcd: %v", err)
	}
	return strings.TrimSpace(line), cmd
}
