package walflight

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// DefaultMaxMessageBytes bounds one gRPC message (one record batch) in both
// directions unless ServerOptions or ClientOptions say otherwise.
const DefaultMaxMessageBytes = 64 << 20

// ServerOptions configure a Server.
type ServerOptions struct {
	// TLSCertFile and TLSKeyFile enable TLS when both are set.
	TLSCertFile string
	TLSKeyFile  string
	// Token, when set, is required on every call as
	// "authorization: Bearer <Token>" gRPC metadata; a missing or wrong
	// token is answered with codes.Unauthenticated.
	Token string
	// MaxMessageBytes bounds one received message; default
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Replica, when the log is a replica of a replicated group, serves the
	// membership actions (ActionMembers…); without it they fail with
	// ErrNotReplicated.
	Replica Replica
}

// Server serves a wal.Log over Arrow Flight.
type Server struct {
	grpc   *grpc.Server
	logger *slog.Logger
}

// NewServer builds a Flight server for l. It does not own l: the caller
// closes it after Shutdown.
func NewServer(l wal.Log, opts ServerOptions) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	gopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(opts.MaxMessageBytes), grpc.MaxSendMsgSize(opts.MaxMessageBytes)}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, fmt.Errorf("TLS needs both a certificate and a key file: %w", errs.ErrInvalid)
	}
	if opts.TLSCertFile != "" {
		creds, err := credentials.NewServerTLSFromFile(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair: %v: %w", err, errs.ErrInvalid)
		}
		gopts = append(gopts, grpc.Creds(creds))
	}
	if opts.Token != "" {
		check := tokenChecker(opts.Token)
		gopts = append(gopts,
			grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if err := check(ctx); err != nil {
					return nil, err
				}
				return h(ctx, req)
			}),
			grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if err := check(ss.Context()); err != nil {
					return err
				}
				return h(srv, ss)
			}))
	}
	g := grpc.NewServer(gopts...)
	flight.RegisterFlightServiceServer(g, &service{log: l, replica: opts.Replica, logger: opts.Logger})
	return &Server{grpc: g, logger: opts.Logger}, nil
}

func tokenChecker(token string) func(context.Context) error {
	want := []byte("Bearer " + token)
	return func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get("authorization") {
			if subtle.ConstantTimeCompare([]byte(v), want) == 1 {
				return nil
			}
		}
		return status.Error(codes.Unauthenticated, "missing or wrong bearer token")
	}
}

// Serve accepts connections on lis until Shutdown. It returns nil after a
// Shutdown.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil && err != grpc.ErrServerStopped {
		return err
	}
	return nil
}

// Shutdown stops accepting calls and waits for in-flight ones (appends
// finish and are synced); when ctx ends first, remaining calls are cut off.
func (s *Server) Shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.logger.Warn("walflight: shutdown deadline reached, cutting off remaining calls")
		s.grpc.Stop()
		<-done
	}
}

// ServeOptions configure Serve.
type ServeOptions struct {
	Server ServerOptions
	Engine wal.Options
	// AddrFile, when set, receives the bound address (host:port and a
	// newline), written atomically once the server accepts connections.
	AddrFile string
	// OnListen, when set, is called with the bound address before serving.
	OnListen func(net.Addr)
	// ShutdownTimeout bounds the graceful part of shutdown; default 10 s.
	ShutdownTimeout time.Duration
}

// Serve opens the engine on dir, listens on listenAddr (":0" ports are
// allowed: the bound address is logged, passed to OnListen and written to
// AddrFile) and serves until ctx ends. Then it stops accepting, lets
// in-flight calls finish (appends are synced), closes the engine — releasing
// the directory lock — and returns nil. It fails early if the directory is
// locked by another process (naming its pid), corrupt, or the address
// cannot be bound.
func Serve(ctx context.Context, dir, listenAddr string, opts ServeOptions) (err error) {
	logger := opts.logger()
	if opts.Engine.Logger == nil {
		opts.Engine.Logger = logger
	}
	eng, err := wal.Open(dir, opts.Engine)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := eng.Close(); err == nil {
			err = cerr
		}
	}()
	lis, err := listen(listenAddr)
	if err != nil {
		return err
	}
	return serveOn(ctx, eng, lis, opts, "dir", dir)
}

func (o ServeOptions) logger() *slog.Logger {
	if o.Server.Logger == nil {
		return slog.Default()
	}
	return o.Server.Logger
}

// listen binds the client address; a failure names it and the reason.
func listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %v: %w", addr, err, errs.ErrUnavailable)
	}
	return lis, nil
}

// serveOn serves l on lis until ctx ends, then shuts down gracefully. It
// closes lis; the caller closes l.
func serveOn(ctx context.Context, l wal.Log, lis net.Listener, opts ServeOptions, what ...any) error {
	logger := opts.logger()
	opts.Server.Logger = logger
	srv, err := NewServer(l, opts.Server)
	if err != nil {
		lis.Close()
		return err
	}
	addr := lis.Addr()
	logger.Info("walflight: serving WAL", append(what, "addr", addr.String(), "tls", opts.Server.TLSCertFile != "", "token", opts.Server.Token != "")...)
	if opts.AddrFile != "" {
		if err := writeAddrFile(opts.AddrFile, addr.String()); err != nil {
			lis.Close()
			return err
		}
	}
	if opts.OnListen != nil {
		opts.OnListen(addr)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	timeout := opts.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	logger.Info("walflight: shutting down", "addr", addr.String())
	srv.Shutdown(sctx)
	return <-served
}

func writeAddrFile(path, addr string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(strings.TrimSpace(addr)+"\n"), 0o644); err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	return nil
}
