package etcdembed

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/dirlock"
)

func TestStartServeRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Options{Dir: dir, MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if ep, err := Endpoint(dir); err != nil || ep != s.Endpoint() {
		t.Fatalf("Endpoint(dir) = %q, %v; want %q", ep, err, s.Endpoint())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	cli.Close()

	resp, err := http.Get(s.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "etcd_server_proposals_committed_total") {
		t.Fatalf("metrics endpoint lacks etcd server metrics")
	}

	// A second server on the same directory is refused, naming our pid.
	_, err = Start(ctx, Options{Dir: dir})
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second start: %v", err)
	}

	s.Close()
	if _, err := Endpoint(dir); err == nil {
		t.Fatalf("endpoint file survived Close")
	}
	// Data persists across a restart on the same directory.
	s2, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cli, err = clientv3.New(clientv3.Config{Endpoints: []string{s2.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	got, err := cli.Get(ctx, "k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v %v", got, err)
	}
}
