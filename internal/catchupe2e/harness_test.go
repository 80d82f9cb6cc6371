package catchupe2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/proc"
)

const (
	testTimeout = 4 * time.Minute
	waitTimeout = 2 * time.Minute
	token       = "e2e-token"
)

// node is one data dir on the embedded default: every walctl process of
// the test runs on it (the master holds the embedded etcd and the WAL;
// others reach them through the addresses it publishes there).
type node struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	procs *proc.Runner
}

func newNode(t *testing.T, env ...string) *node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	procs := proc.NewRunner(walctlBin, dir, append([]string{"WALCTL_DATA_DIR=" + filepath.Join(dir, "data"),
		"WALCTL_MASTER_TOKEN=" + token}, env...)...)
	procs.WaitTimeout = waitTimeout
	return &node{t: t, ctx: ctx, dir: dir, procs: procs}
}

func (n *node) dataDir() string { return filepath.Join(n.dir, "data") }
func (n *node) tablePath(table string) string {
	return filepath.Join(n.dataDir(), "tables", table+".lance")
}

// startEnv starts walctl with env added to the node's environment.
func (n *node) startEnv(name string, env []string, args ...string) *proc.Proc {
	n.t.Helper()
	return n.procs.Start(n.t, name, env, args...)
}

// run runs walctl to completion and requires exit 0; it returns stdout.
func (n *node) run(args ...string) string {
	n.t.Helper()
	r := n.procs.Run(n.t, args[0], nil, args...)
	if r.Code != 0 {
		n.t.Fatalf("walctl %s: %s", strings.Join(args, " "), r)
	}
	return r.Stdout
}

// api sends one request to the master API and decodes the answer.
func (n *node) api(base, method, path string, body, out any) int {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(n.ctx, method, base+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			n.t.Fatalf("%s %s: HTTP %d: %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// publishedIDs counts every id of the table's latest version as the
// official LanceDB reader sees it.
func (n *node) publishedIDs(table string) map[int64]int {
	n.t.Helper()
	ids, err := exactlyonce.OracleIDs(n.ctx, n.tablePath(table))
	if err != nil {
		n.t.Fatal(err)
	}
	return exactlyonce.Count(ids)
}
