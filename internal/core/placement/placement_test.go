package placement

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/etcdembed"
)

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestPlacementIsCreateIfAbsentAndNeverChangesSilently(t *testing.T) {
	cli := startEtcd(t)
	s := New(cli, "/walctl/v1/", 10*time.Second)
	ctx := context.Background()

	if _, err := s.Group(ctx, "orders"); !errors.Is(err, ErrNoPlacement) || !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("group of an unplaced table: %v, want ErrNoPlacement", err)
	}
	if err := s.Record(ctx, "orders", "g1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "orders", "g1"); err != nil {
		t.Fatalf("recording the same group again: %v", err)
	}
	err := s.Record(ctx, "orders", "g2")
	if !errors.Is(err, ErrPlacementConflict) || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("recording another group: %v, want ErrPlacementConflict", err)
	}
	for _, want := range []string{`"g1"`, `"g2"`, `"orders"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("conflict %q does not name %s", err, want)
		}
	}
	if g, err := s.Group(ctx, "orders"); err != nil || g != "g1" {
		t.Fatalf("group after the refused change = %q, %v; want g1", g, err)
	}
	if _, err := cli.Put(ctx, "/walctl/v1/placement/odd", `{"kind":"placement","version":9,"group":"g1"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Group(ctx, "odd"); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("record of a future version: %v, want ErrUnknownKind (fail closed)", err)
	}
}

func TestPlacementUnavailableEtcd(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s := New(cli, "/walctl/v1", 300*time.Millisecond)
	if _, err := s.Group(context.Background(), "orders"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("unreachable etcd: %v, want ErrUnavailable", err)
	}
}
