package walreplica

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/proc"
	"github.com/walctl/walctl/internal/testutil/tlsgen"
	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

var walctlBin string

func TestMain(m *testing.M) { walctlbin.Main(m, &walctlBin) }

// EnvBytes sets the payload ACKed before the all-replicas crash.
const EnvBytes = "WALCTL_REPLICA_BYTES"

func replicaBytes(t *testing.T) int64 {
	s := os.Getenv(EnvBytes)
	if s == "" {
		return 8 << 20
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvBytes, s, err)
	}
	return int64(n)
}

// cluster is one test's world: a process runner, etcd, a CA and groups.
type cluster struct {
	t      *testing.T
	dir    string
	procs  *proc.Runner
	etcd   *etcdembed.Server
	ca     *tlsgen.CA
	groups []*proc.WALGroup
}

func newCluster(t *testing.T) *cluster {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	etcd, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(dir, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	ca, err := tlsgen.NewCA(filepath.Join(dir, "tls"), "walctl")
	if err != nil {
		t.Fatal(err)
	}
	procs := proc.NewRunner(walctlBin, dir, "WALCTL_ETCD_ENDPOINTS="+etcd.Endpoint(), "WALCTL_COMMAND_TIMEOUT=20s")
	procs.WaitTimeout = 10 * time.Minute
	return &cluster{t: t, dir: dir, procs: procs, etcd: etcd, ca: ca}
}

// group starts a TLS group of n replicas.
func (c *cluster) group(name string, n int, args ...string) *proc.WALGroup {
	return c.groupIn(name, n, nil, args...)
}

// groupIn is group with replica directories placed by dir (nil or "":
// the default place).
func (c *cluster) groupIn(name string, n int, dir func(replica string) string, args ...string) *proc.WALGroup {
	g := c.procs.StartWALGroup(c.t, name, n, proc.WALGroupOptions{
		Dir:    dir,
		CAFile: c.ca.CertFile,
		Cert: func(replica string) (string, string) {
			p, err := c.ca.Issue(replica)
			if err != nil {
				c.t.Fatal(err)
			}
			return p.CertFile, p.KeyFile
		},
		Args: args,
	})
	c.groups = append(c.groups, g)
	return g
}

// env is a walctl command's environment reaching every group.
func (c *cluster) env(extra ...string) []string {
	return append(proc.ClientEnv(c.groups...), extra...)
}

// run runs walctl and returns its result.
func (c *cluster) run(name string, args ...string) proc.Result {
	c.t.Helper()
	return c.procs.Run(c.t, name, c.env(), args...)
}

// router is an in-process producer's view of every group, as walctl's own
// Factory builds it, with placement read from etcd.
func (c *cluster) groupsConfig() walflight.Groups {
	g, err := walflight.ParseGroups(proc.ClientEnv(c.groups...)[0][len("WALCTL_WAL_GROUPS="):])
	if err != nil {
		c.t.Fatal(err)
	}
	return g
}

func (c *cluster) clientOptions(timeout time.Duration) walflight.ClientOptions {
	return walflight.ClientOptions{TLS: true, CAFile: c.ca.CertFile, CallTimeout: timeout}
}

func itoa(n int) string { return strconv.Itoa(n) }
