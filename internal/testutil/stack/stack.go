// Package stack starts the real dependencies that core tests publish
// through: an embedded etcd and an in-process WAL engine in a temporary
// directory, with a Lance root beside them. Everything is stopped when the
// test ends.
package stack

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/wal"
)

// Stack is one test's etcd, WAL and Lance root.
type Stack struct {
	// Ctx ends after the timeout given to Start, or when the test ends.
	Ctx       context.Context
	Dir       string
	Etcd      *etcdembed.Server
	WAL       *wal.Engine
	LanceRoot string
}

// Start starts the stack; walOpts configure the WAL engine.
func Start(t testing.TB, timeout time.Duration, walOpts wal.Options) *Stack {
	t.Helper()
	s := StartEtcd(t, timeout)
	log, err := wal.Open(filepath.Join(s.Dir, "wal"), walOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	s.WAL = log
	return s
}

// StartEtcd starts the stack without a WAL engine (WAL is nil), for tests
// whose WAL is a `wal serve` process.
func StartEtcd(t testing.TB, timeout time.Duration) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(dir, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &Stack{Ctx: ctx, Dir: dir, Etcd: srv, LanceRoot: filepath.Join(dir, "tables")}
}

// Coord connects a coordination client to the stack's etcd (cfg.Endpoints
// is filled in); it is closed when the test ends.
func (s *Stack) Coord(t testing.TB, cfg coord.Config) *coord.Client {
	t.Helper()
	cfg.Endpoints = []string{s.Etcd.Endpoint()}
	co, err := coord.Connect(s.Ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { co.Close() })
	return co
}
