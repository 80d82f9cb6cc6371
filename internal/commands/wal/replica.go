package wal

import (
	"fmt"
	"net"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/core/walraft"
)

// Settings of `wal serve` in replicated mode (flags, WALCTL_REPLICA_* and
// the config file's replica: section). --bootstrap is a flag only: creating
// a group is a deliberate act of one first start, never configuration.
const (
	KeyReplicaGroup      = "replica.group"
	KeyReplicaName       = "replica.name"
	KeyReplicaPeerListen = "replica.peer_listen"
	KeyReplicaPeerCert   = "replica.peer_tls_cert"
	KeyReplicaPeerKey    = "replica.peer_tls_key"
	KeyReplicaPeerCA     = "replica.peer_tls_ca"
)

var replicaKeys = []string{KeyReplicaGroup, KeyReplicaName, KeyReplicaPeerListen, KeyReplicaPeerCert, KeyReplicaPeerKey, KeyReplicaPeerCA}

func init() {
	cmdutil.Register(
		cmdutil.Setting{Key: KeyReplicaGroup, Default: "", Usage: "replicated mode: the WAL group this replica belongs to"},
		cmdutil.Setting{Key: KeyReplicaName, Default: "", Usage: "replicated mode: this replica's name (its id adds a suffix chosen on the first start of an empty dir)"},
		cmdutil.Setting{Key: KeyReplicaPeerListen, Default: "", Usage: "replicated mode: host:port of the Raft peer transport (listened on and advertised)"},
		cmdutil.Setting{Key: KeyReplicaPeerCert, Default: "", Usage: "replicated mode: this replica's peer TLS certificate (PEM)"},
		cmdutil.Setting{Key: KeyReplicaPeerKey, Default: "", Usage: "replicated mode: this replica's peer TLS key (PEM)"},
		cmdutil.Setting{Key: KeyReplicaPeerCA, Default: "", Usage: "replicated mode: CA bundle that signed every peer's certificate (PEM)"},
	)
}

// ReplicaOptions configure `wal serve` as one replica of a group.
type ReplicaOptions struct {
	Group, Name, PeerListen   string
	Bootstrap                 bool
	PeerCert, PeerKey, PeerCA string
}

// replicaOptions reads the replicated-mode settings; nil when --group is
// not set (single-directory mode). Incomplete settings are usage errors.
func replicaOptions(f *cmdutil.Factory, bootstrap bool) (*ReplicaOptions, error) {
	c := f.Config
	r := &ReplicaOptions{Group: c.String(KeyReplicaGroup), Name: c.String(KeyReplicaName), PeerListen: c.String(KeyReplicaPeerListen),
		PeerCert: c.String(KeyReplicaPeerCert), PeerKey: c.String(KeyReplicaPeerKey), PeerCA: c.String(KeyReplicaPeerCA), Bootstrap: bootstrap}
	if r.Group == "" {
		if bootstrap || r.Name != "" || r.PeerListen != "" {
			return nil, cmdutil.FlagErrorf("--bootstrap, --name and --peer-listen need --group (replicated mode)")
		}
		return nil, nil
	}
	if r.Name == "" || r.PeerListen == "" {
		return nil, cmdutil.FlagErrorf("replicated mode (--group %s) needs --name and --peer-listen", r.Group)
	}
	if _, _, err := net.SplitHostPort(r.PeerListen); err != nil {
		return nil, cmdutil.FlagErrorf("--peer-listen %q: %v", r.PeerListen, err)
	}
	n := 0
	for _, v := range []string{r.PeerCert, r.PeerKey, r.PeerCA} {
		if v != "" {
			n++
		}
	}
	if n != 0 && n != 3 {
		return nil, cmdutil.FlagErrorf("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together")
	}
	return r, nil
}

// config builds the replica's configuration, loading its peer TLS files
// (a bad file is exit 2 naming it).
func (r *ReplicaOptions) config(opts *ServeOptions) (walraft.Config, error) {
	cfg := walraft.Config{Dir: opts.Dir, Group: r.Group, Name: r.Name, PeerAddr: r.PeerListen, Bootstrap: r.Bootstrap,
		Engine: opts.Engine, Logger: opts.Logger}
	if r.PeerCert != "" {
		tc, err := walflight.PeerTLS(r.PeerCert, r.PeerKey, r.PeerCA)
		if err != nil {
			return cfg, fmt.Errorf("replica %s: %w", r.Name, err)
		}
		cfg.PeerTLS = tc
	}
	return cfg, nil
}
