package walcmd

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

// ServeOptions of `walctl wal serve`.
type ServeOptions struct {
	Logger   *slog.Logger
	Engine   wal.Options
	Token    string
	Dir      string
	Listen   string
	TLSCert  string
	TLSKey   string
	AddrFile string
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
in-flight appends finish and sync, closes the engine and exits 0.`,
		Example: `  walctl wal serve --listen 127.0.0.1:7070
  WALCTL_WAL_TOKEN=s3cret walctl wal serve --dir /var/lib/walctl/wal --listen :7070 --tls-cert tls.crt --tls-key tls.key
  walctl --wal 127.0.0.1:7070 wal stats`,
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
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	return cmd
}

func serveRun(ctx context.Context, opts *ServeOptions) error {
	return walflight.Serve(ctx, opts.Dir, opts.Listen, walflight.ServeOptions{
		Server: walflight.ServerOptions{
			TLSCertFile: opts.TLSCert,
			TLSKeyFile:  opts.TLSKey,
			Token:       opts.Token,
			Logger:      opts.Logger,
		},
		Engine:   opts.Engine,
		AddrFile: opts.AddrFile,
	})
}
