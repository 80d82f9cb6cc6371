package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/health"
	"github.com/walctl/walctl/internal/core/wal"
)

// runOptions are doctor's options over a real embedded etcd, a real
// in-process WAL and writable directories.
func runOptions(t *testing.T, printed *any) *Options {
	t.Helper()
	ctx := context.Background()
	srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	log, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	opts := options(func(context.Context) (wal.Log, error) { return log, nil }, printed)
	opts.Global = cmdutil.Global{DataDir: t.TempDir(), LanceRoot: t.TempDir(), EtcdEndpoints: []string{srv.Endpoint()}}
	opts.EtcdEndpoints = func(context.Context) ([]string, error) { return []string{srv.Endpoint()}, nil }
	opts.Etcd = func(ctx context.Context) (*clientv3.Client, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}})
		if err == nil {
			t.Cleanup(func() { cli.Close() })
		}
		return cli, err
	}
	return opts
}

// Every dependency up: one ok row per check and no error (exit 0).
func TestDoctorRunHealthy(t *testing.T) {
	var printed any
	opts := runOptions(t, &printed)
	if err := doctorRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	res, ok := printed.(Result)
	if !ok || !res.OK {
		t.Fatalf("printed %+v", printed)
	}
	names := map[string]bool{}
	for _, c := range res.Checks {
		names[c.Name] = true
		if c.Status != health.OK {
			t.Fatalf("check %+v", c)
		}
	}
	for _, want := range []string{"data-dir", "lance-root", "etcd", "wal", "wal damage"} {
		if !names[want] {
			t.Fatalf("no %q check in %+v", want, res.Checks)
		}
	}
}

// etcd unreachable and a Lance root that is a file: both rows fail, every
// other check still runs, and the error carries the unreachable
// dependency's category (exit 5).
func TestDoctorRunFailures(t *testing.T) {
	var printed any
	opts := runOptions(t, &printed)
	opts.Etcd = func(context.Context) (*clientv3.Client, error) {
		return nil, fmt.Errorf("dial 127.0.0.1:1: connection refused: %w", errs.ErrUnavailable)
	}
	opts.Global.LanceRoot = filepath.Join(opts.Global.DataDir, "lance")
	if err := os.WriteFile(opts.Global.LanceRoot, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := doctorRun(context.Background(), opts)
	res, ok := printed.(Result)
	if !ok || res.OK || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("printed %+v, err %v", printed, err)
	}
	failed := map[string]bool{}
	for _, c := range res.Checks {
		if c.Status == health.Fail {
			failed[c.Name] = true
		}
	}
	if len(failed) != 2 || !failed["etcd"] || !failed["lance-root"] {
		t.Fatalf("failed checks %v in %+v", failed, res.Checks)
	}
}
