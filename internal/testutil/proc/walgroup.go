package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WALGroupOptions shape the replicas StartWALGroup starts.
type WALGroupOptions struct {
	// CAFile and Cert enable TLS: the CA bundle and each replica's
	// certificate and key, used for its Flight API and, mutually, for its
	// peer transport. Without them everything is plaintext.
	CAFile string
	Cert   func(replica string) (certFile, keyFile string)
	// Args are added to every `wal serve` (e.g. --wal-generation-bytes).
	Args []string
	// Env is given to every replica and to the add-replica commands.
	Env []string
	// Dir, when set, places a replica's directory ("" keeps the default,
	// <runner dir>/wal/<name>): a test puts one on a power-loss mount.
	Dir func(replica string) string
}

// WALReplica is one `walctl wal serve` replica of a test's WAL group, on
// fixed loopback ports so that it restarts on the same addresses.
type WALReplica struct {
	Group, Name, Dir string
	// Addr is the Flight (client) address; PeerAddr the Raft transport's.
	Addr, PeerAddr string
	Proc           *Proc
	args           []string
	g              *WALGroup
}

// WALGroup is a replicated WAL group of `wal serve` processes.
type WALGroup struct {
	Name     string
	Replicas []*WALReplica
	r        *Runner
	opts     WALGroupOptions
}

// StartWALGroup starts a group of n replicas named <name>-r<i> under the
// runner's directory: the first with --bootstrap, the others on empty
// directories, each then added by `walctl wal add-replica` (as an operator
// would), so that the group has n voters when it returns. Processes are
// SIGKILLed when t ends.
func (r *Runner) StartWALGroup(t testing.TB, name string, n int, opts WALGroupOptions) *WALGroup {
	t.Helper()
	g := &WALGroup{Name: name, r: r, opts: opts}
	for i := 0; i < n; i++ {
		rep := &WALReplica{Group: name, Name: fmt.Sprintf("%s-r%d", name, i), g: g}
		rep.Dir = filepath.Join(r.Dir, "wal", rep.Name)
		if opts.Dir != nil && opts.Dir(rep.Name) != "" {
			rep.Dir = opts.Dir(rep.Name)
		}
		rep.Addr, rep.PeerAddr = freePort(t), freePort(t)
		rep.args = []string{"wal", "serve", "--dir", rep.Dir, "--listen", rep.Addr, "--addr-file", rep.Dir + ".addr",
			"--group", name, "--name", rep.Name, "--peer-listen", rep.PeerAddr}
		if opts.Cert != nil {
			cert, key := opts.Cert(rep.Name)
			rep.args = append(rep.args, "--tls-cert", cert, "--tls-key", key,
				"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", opts.CAFile)
		}
		rep.args = append(rep.args, opts.Args...)
		g.Replicas = append(g.Replicas, rep)
	}
	g.Replicas[0].start(t, "--bootstrap")
	for _, rep := range g.Replicas[1:] {
		rep.Start(t)
	}
	for _, rep := range g.Replicas[1:] {
		if res := g.Run(t, "add-"+rep.Name, "wal", "add-replica", "--group", name, "--peer", rep.PeerAddr); res.Code != 0 {
			t.Fatalf("add %s to %s: %s", rep.Name, name, res)
		}
	}
	return g
}

func freePort(t testing.TB) string {
	a, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Spec is the group as wal-groups lists it: name=addr,addr,….
func (g *WALGroup) Spec() string {
	addrs := make([]string, len(g.Replicas))
	for i, rep := range g.Replicas {
		addrs[i] = rep.Addr
	}
	return g.Name + "=" + strings.Join(addrs, ",")
}

// ClientEnv is the environment of a walctl command that reaches groups
// (wal-groups, and TLS towards their Flight API when enabled).
func ClientEnv(groups ...*WALGroup) []string {
	specs := make([]string, len(groups))
	for i, g := range groups {
		specs[i] = g.Spec()
	}
	env := []string{"WALCTL_WAL_GROUPS=" + strings.Join(specs, ";")}
	if len(groups) > 0 && groups[0].opts.CAFile != "" {
		env = append(env, "WALCTL_WAL_TLS=true", "WALCTL_WAL_CA_FILE="+groups[0].opts.CAFile)
	}
	return append(env, groups[0].opts.Env...)
}

// Run runs a walctl command against the group.
func (g *WALGroup) Run(t testing.TB, name string, args ...string) Result {
	t.Helper()
	return g.r.Run(t, name, ClientEnv(g), args...)
}

// Start (re)starts the replica on its directory and addresses and waits
// until it serves.
func (rep *WALReplica) Start(t testing.TB) { rep.start(t) }

func (rep *WALReplica) start(t testing.TB, extra ...string) {
	t.Helper()
	addrFile := rep.Dir + ".addr"
	if err := os.Remove(addrFile); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	rep.Proc = rep.g.r.Start(t, rep.Name, rep.g.opts.Env, append(append([]string{}, rep.args...), extra...)...)
	rep.Proc.WaitFile(addrFile)
}

// Wipe SIGKILLs the replica (if it runs) and replaces its directory with an
// empty one: a lost disk.
func (rep *WALReplica) Wipe(t testing.TB) {
	t.Helper()
	if rep.Proc != nil {
		rep.Proc.Kill()
	}
	if err := os.RemoveAll(rep.Dir); err != nil {
		t.Fatal(err)
	}
}
