package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// Bounds of every wait. They are deadlines, not synchronisation: each wait
// ends as soon as its condition holds.
const (
	testTimeout = 3 * time.Minute
	waitTimeout = 60 * time.Second
)

// cluster is one test's real system: an embedded etcd in the test process,
// a `walctl wal serve` process, and a Lance root shared by every walctl
// process of the test.
type cluster struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	etcd    *etcdembed.Server
	etcdCli *clientv3.Client
	procs   *proc.Runner
	walSrv  *proc.Proc
	walAddr string
	wal     *walflight.Client
	lance   string
	seq     *atomic.Int64 // numbers the processes' data dirs
	// official is the official reader with the Lance root's storage
	// options (nil: a local root, found when needed).
	official *oracle.Oracle
}

func newCluster(t *testing.T) *cluster { return newClusterWith(t, etcdembed.Options{}) }

// newClusterWith starts the cluster's etcd with opts (Dir is set here).
func newClusterWith(t *testing.T, opts etcdembed.Options) *cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	c := &cluster{t: t, ctx: ctx, dir: dir, lance: filepath.Join(dir, "tables"), seq: new(atomic.Int64)}
	c.procs = proc.NewRunner(walctlBin, dir)
	c.procs.WaitTimeout = waitTimeout

	opts.Dir = filepath.Join(dir, "etcd")
	srv, err := etcdembed.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c.etcd = srv
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	c.etcdCli = cli

	addrFile := filepath.Join(dir, "wal.addr")
	c.walSrv = c.start("wal-serve", nil, "--data-dir", filepath.Join(dir, "walsrv"), "wal", "serve",
		"--listen", "127.0.0.1:0", "--addr-file", addrFile)
	c.walAddr = c.walSrv.WaitFile(addrFile)
	t.Cleanup(func() { c.walSrv.Terminate(15 * time.Second) })

	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	w, err := walflight.Dial(dctx, c.walAddr, walflight.ClientOptions{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	c.wal = w
	return c
}

// forT returns the cluster as seen by subtest t: helpers fail t.
func (c *cluster) forT(t *testing.T) *cluster {
	cc := *c
	cc.t = t
	return &cc
}

// globalArgs point a walctl process at the cluster (at etcdEndpoint for
// etcd), with a data dir of its own.
func (c *cluster) globalArgs(etcdEndpoint string) []string {
	return []string{"--etcd-endpoints", etcdEndpoint, "--wal", c.walAddr, "--lance-root", c.lance,
		"--data-dir", filepath.Join(c.dir, fmt.Sprintf("proc-%d", c.seq.Add(1))), "--output", "json"}
}

// walctl starts walctl on the cluster with env (NAME=value entries added to
// an isolated environment).
func (c *cluster) walctl(name string, env []string, args ...string) *proc.Proc {
	return c.start(name, env, append(c.globalArgs(c.etcd.Endpoint()), args...)...)
}

// run runs walctl on the cluster to completion.
func (c *cluster) run(name string, env []string, args ...string) proc.Result {
	return c.walctl(name, env, args...).Wait()
}

// start starts walctl with exactly args.
func (c *cluster) start(name string, env []string, args ...string) *proc.Proc {
	c.t.Helper()
	return c.procs.Start(c.t, name, env, args...)
}

// Exit codes of walctl's interface.
const (
	exitOK          = 0
	exitNotFound    = 3
	exitConflict    = 4
	exitUnavailable = 5
)

// expect fails unless r ended with code.
func expect(t *testing.T, what string, r proc.Result, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: want exit %d, got %s", what, code, r)
	}
}

// summary is the JSON output of prepare and publish.
type summary struct {
	Table  string           `json:"table"`
	Epoch  uint64           `json:"epoch"`
	Rounds []publish.Result `json:"rounds"`
}

func parseSummary(t *testing.T, r proc.Result) summary {
	t.Helper()
	var s summary
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, r)
	}
	return s
}

// published are the rounds that committed or found their plan published.
func (s summary) published() []publish.Result {
	var out []publish.Result
	for _, r := range s.Rounds {
		if r.Outcome == publish.OutcomePublished {
			out = append(out, r)
		}
	}
	return out
}

// createTable registers table with two shards through `walctl table create`.
func (c *cluster) createTable(table string) {
	c.t.Helper()
	schema := filepath.Join(c.dir, "schema.json")
	spec := `[{"name": "id", "type": "int64"},
 {"name": "body", "type": "utf8", "nullable": true},
 {"name": "vec", "type": "fixed_size_list<float32>[8]"}]`
	if err := os.WriteFile(schema, []byte(spec), 0o644); err != nil {
		c.t.Fatal(err)
	}
	expect(c.t, "table create "+table, c.run("create", nil, "table", "create", table, "--schema", schema, "--shards", "2"), exitOK)
}

// tablePath is where table's Lance dataset lives.
func (c *cluster) tablePath(table string) string {
	if strings.Contains(c.lance, "://") {
		return c.lance + "/" + table + ".lance"
	}
	return filepath.Join(c.lance, table+".lance")
}

// oracle is the official reader of the cluster's Lance root.
func (c *cluster) oracle() *oracle.Oracle {
	if c.official != nil {
		return c.official
	}
	return oracletest.MustFind(c.t)
}

// latestVersion is the table's latest Lance version, 1 for a table not yet
// created (a publisher creates version 1 before its first fence).
func (c *cluster) latestVersion(table string) uint64 {
	c.t.Helper()
	ds, err := lance.Open(c.tablePath(table))
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return 1
	}
	if err != nil {
		c.t.Fatal(err)
	}
	v, err := ds.LatestVersion()
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// version is what a test reads of one Lance version.
type version struct {
	config map[string]string
	rows   uint64
}

// manifests reads every version of table, by number.
func (c *cluster) manifests(table string) map[uint64]version {
	c.t.Helper()
	out := map[uint64]version{}
	c.eachManifest(table, func(m *lance.Manifest) {
		out[m.Version] = version{config: m.Config, rows: m.Rows()}
	})
	return out
}

// eachManifest calls fn with every version of table's manifest, oldest
// first.
func (c *cluster) eachManifest(table string, fn func(*lance.Manifest)) {
	c.t.Helper()
	ds, err := lance.Open(c.tablePath(table))
	if err != nil {
		c.t.Fatal(err)
	}
	vs, err := ds.Versions()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, v := range vs {
		m, err := ds.Manifest(v.Version)
		if err != nil {
			c.t.Fatal(err)
		}
		fn(m)
	}
}

// dataCommitsOf lists the versions that added rows under planID: the
// commits of that plan. A plan published twice would be listed twice.
func (c *cluster) dataCommitsOf(table, planID string) []uint64 {
	c.t.Helper()
	var out []uint64
	ms := c.manifests(table)
	for v, m := range ms {
		if m.config[publish.KeyPlan] == planID && m.rows > ms[v-1].rows {
			out = append(out, v)
		}
	}
	return out
}

// claimKey is table's claim in etcd (walctl's default prefix).
func claimKey(table string) string { return coord.DefaultPrefix + "/claims/" + table }

// waitClaimGone waits, by watching etcd, until table has no claim (its
// lease expired or it was released or revoked).
func (c *cluster) waitClaimGone(table string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, waitTimeout)
	defer cancel()
	resp, err := c.etcdCli.Get(ctx, claimKey(table))
	if err != nil {
		c.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return
	}
	for wr := range c.etcdCli.Watch(ctx, claimKey(table), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			c.t.Fatal(err)
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return
			}
		}
	}
	c.t.Fatalf("claim of %s still held after %s: %v", table, waitTimeout, ctx.Err())
}

// walEpoch is the table's publisher epoch in the WAL.
func (c *cluster) walEpoch(table string) uint64 {
	c.t.Helper()
	e, err := c.wal.Epoch(c.ctx, table)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// listTree lists every file under dir (relative paths with sizes), empty
// when dir does not exist.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out = append(out, fmt.Sprintf("%s %d %v", rel, info.Size(), info.IsDir()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
