package coord

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	u, _ := url.Parse("http://" + addr)
	return *u
}

// Issue 31 (found by an adversarial reading): with WithRequireLeader, a
// member that has lost its leader cancels the hint's watches at once, while
// the reload (two serializable reads) succeeds locally. The hint backs off
// before watching again instead of spinning (it used to make about a
// thousand requests a second for as long as the partition lasted). A real
// two-member cluster, one member stopped.
func TestHintBacksOffOnALeaderlessMember(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a", "b"}
	peers := []url.URL{freeURL(t), freeURL(t)}
	clients := []url.URL{freeURL(t), freeURL(t)}
	initial := ""
	for i, n := range names {
		if i > 0 {
			initial += ","
		}
		initial += fmt.Sprintf("%s=%s", n, peers[i].String())
	}
	var members []*embed.Etcd
	for i, n := range names {
		cfg := embed.NewConfig()
		cfg.Name = n
		cfg.Dir = filepath.Join(dir, n)
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{filepath.Join(dir, n+".log")}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peers[i]}, []url.URL{peers[i]}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clients[i]}, []url.URL{clients[i]}
		cfg.InitialCluster = initial
		cfg.InitialClusterToken = "leaderless"
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, e)
	}
	defer members[0].Close()
	for _, m := range members {
		select {
		case <-m.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			t.Fatal("cluster not ready")
		}
	}

	var ranges, watches atomic.Int64
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{clients[0].String()},
		DialTimeout: 5 * time.Second,
		Logger:      nopLogger(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if method == "/etcdserverpb.KV/Range" {
					ranges.Add(1)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				if method == "/etcdserverpb.Watch/Watch" {
					watches.Add(1)
				}
				return streamer(ctx, desc, cc, method, opts...)
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := New(cli, Config{Prefix: "/leaderless"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := c.StartHint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	members[1].Close() // member a loses its quorum
	deadline := time.Now().Add(20 * time.Second)
	for members[0].Server.Leader() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("member a still has a leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	r0, w0 := ranges.Load(), watches.Load()
	time.Sleep(2 * time.Second)
	dr, dw := ranges.Load()-r0, watches.Load()-w0
	t.Logf("leaderless member, 2s: %d range reads, %d watch streams; hint synced=%v", dr, dw, h.Synced())
	if dr > 20 || dw > 20 {
		t.Fatalf("hint busy-loops on a leaderless member: %d range reads and %d watch streams in 2s", dr, dw)
	}
}
