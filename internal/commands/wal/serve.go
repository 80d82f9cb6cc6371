package wal

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	corewal "github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

// ServeOptions of `walctl wal serve`.
type ServeOptions struct {
	Logger   *slog.Logger
	Engine   corewal.Options
	Token    string
	Dir      string
	Listen   string
	TLSCert  string
	TLSKey   string
	AddrFile string
	// CPUProfile, when set, is where a CPU profile of the whole serve goes
	// (hidden flag: the replicated benchmark profiles its replicas).
	CPUProfile string
	// Replica is set in replicated mode (--group).
	Replica *ReplicaOptions
}

// NewCmdServe returns `wal serve`.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--dir D] [--listen ADDR]",
		Short: "Serve the WAL over Arrow Flight",
		Long: `Open the WAL engine on --dir (default <data-dir>/wal) and serve it over Arrow
Flight: DoPut appends, DoGet reads, actions register tables, seal, read and
advance publisher epochs, trim and report stats. The directory is locked; the
bound address is logged and written to --addr-file (default <dir>/ENDPOINT),
where other walctl commands on the same data dir find it.

With a bearer token (WALCTL_WAL_TOKEN or wal-token in the config file) every
call must carry it. On SIGTERM or SIGINT the server stops accepting, lets
in-flight appends finish and sync, closes the engine and exits 0.

Replicated mode (--group G --name N --peer-listen ADDR): the process is one
replica of the Raft group G (DESIGN.md §6). Every state change goes through
the group's log and an append is ACKed once a quorum has it fsynced. Peers
talk over --peer-listen with mutual TLS (--peer-tls-cert/-key/-ca; a peer
with a certificate the CA did not sign, or of another group, is refused and
the log says why). Only --bootstrap, on the first start of a new group on an
empty --dir, creates the group; any other replica started on an empty
directory waits to be added by 'walctl wal add-replica' (it never votes
before it has caught up). Clients reach the group through --wal-groups.

EXIT STATUS
  0 stopped by SIGTERM/SIGINT, 2 bad flags or certificates (the file is
  named), 5 an address in use (the address is named), 4 the directory is
  held by another process (its pid is named).`,
		Example: `  walctl wal serve --listen 127.0.0.1:7070
  WALCTL_WAL_TOKEN=s3cret walctl wal serve --dir /var/lib/walctl/wal --listen :7070 --tls-cert tls.crt --tls-key tls.key
  walctl --wal 127.0.0.1:7070 wal stats
  # the first replica of a new group g1, then two more that the leader adds
  walctl wal serve --dir /srv/wal/a --listen :7071 --group g1 --name a --peer-listen 10.0.0.1:7171 --bootstrap \
    --peer-tls-cert a.crt --peer-tls-key a.key --peer-tls-ca ca.crt
  walctl wal serve --dir /srv/wal/b --listen :7072 --group g1 --name b --peer-listen 10.0.0.2:7172 \
    --peer-tls-cert b.crt --peer-tls-key b.key --peer-tls-ca ca.crt`,
		Args: cmdutil.ExactArgs(0, "wal serve takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (opts.TLSCert == "") != (opts.TLSKey == "") {
				return cmdutil.FlagErrorf("--tls-cert and --tls-key go together")
			}
			if _, _, err := net.SplitHostPort(opts.Listen); err != nil {
				return cmdutil.FlagErrorf("--listen %q: %v", opts.Listen, err)
			}
			if opts.Dir == "" {
				opts.Dir = f.WALDir()
			}
			if opts.AddrFile == "" {
				opts.AddrFile = filepath.Join(opts.Dir, cmdutil.WALEndpointFile)
			}
			opts.Logger, opts.Engine, opts.Token = f.Logger, f.WALEngineOptions(), f.Global().WALToken
			bootstrap, _ := cmd.Flags().GetBool("bootstrap")
			r, err := replicaOptions(f, bootstrap)
			if err != nil {
				return err
			}
			opts.Replica = r
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serveRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "WAL directory (default <data-dir>/wal)")
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:7070", "address to listen on (port 0 picks a free one)")
	cmd.Flags().StringVar(&opts.TLSCert, "tls-cert", "", "TLS certificate (PEM)")
	cmd.Flags().StringVar(&opts.TLSKey, "tls-key", "", "TLS private key (PEM)")
	cmd.Flags().StringVar(&opts.AddrFile, "addr-file", "", "write the bound address here (default <dir>/ENDPOINT)")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the process to FILE when it stops")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	cmd.Flags().Bool("bootstrap", false, "replicated mode: create the group with this replica (first start of a new group, empty --dir only)")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	cmdutil.AddSettingFlags(cmd.Flags(), replicaKeys...)
	return cmd
}

func serveRun(ctx context.Context, opts *ServeOptions) error {
	if opts.CPUProfile != "" {
		stop, err := cmdutil.CPUProfile(opts.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	so := walflight.ServeOptions{
		Server: walflight.ServerOptions{
			TLSCertFile: opts.TLSCert,
			TLSKeyFile:  opts.TLSKey,
			Token:       opts.Token,
			Logger:      opts.Logger,
		},
		Engine:   opts.Engine,
		AddrFile: opts.AddrFile,
	}
	if opts.Replica == nil {
		return walflight.Serve(ctx, opts.Dir, opts.Listen, so)
	}
	cfg, err := opts.Replica.config(opts)
	if err != nil {
		return err
	}
	return walflight.ServeReplica(ctx, cfg, opts.Listen, so)
}
