package coord

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
)

// Rule 1: every etcd call has a deadline. A dead etcd yields an error that
// wraps errs.ErrUnavailable and names the endpoint, within the timeout.
func TestDeadEtcd(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	start := time.Now()
	_, err = Connect(context.Background(), Config{Endpoints: []string{dead}, DialTimeout: time.Second})
	elapsed := time.Since(start)
	if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Connect to a dead endpoint: %v", err)
	}
	if elapsed > 3*time.Second {
		t.Fatalf("Connect took %s with a 1s dial timeout", elapsed)
	}

	// Cancellation is reported as such, not as an outage.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Connect(ctx, Config{Endpoints: []string{dead}, DialTimeout: time.Second}); !errors.Is(err, context.Canceled) || errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Connect with a cancelled context: %v", err)
	}
}

// An etcd that dies (SIGKILL) under a connected client and a held claim: every call
// returns ErrUnavailable naming the endpoint within the call timeout.
func TestEtcdDiesUnderClient(t *testing.T) {
	ctx := testCtx(t)
	endpoint, etcd := startChildEtcd(t)
	const callTimeout = 700 * time.Millisecond
	c := newClient(t, testPrefix(t), Config{Endpoints: []string{endpoint}, CallTimeout: callTimeout})
	cl, err := c.Acquire(ctx, "t", worker("w"))
	if err != nil {
		t.Fatal(err)
	}
	if err := etcd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = etcd.Wait()

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error { _, err := c.Acquire(ctx, "u", worker("w")); return err }},
		{"Busy", func() error { _, _, err := c.Busy(ctx, "u"); return err }},
		{"Get", func() error { _, err := c.Get(ctx, "t"); return err }},
		{"List", func() error { _, err := c.List(ctx); return err }},
		{"Revoke", func() error { _, err := c.Revoke(ctx, RevokeRequest{Table: "t", Actor: "op"}); return err }},
		{"Valid", func() error { return cl.Valid(ctx) }},
		{"SetEpoch", func() error { return cl.SetEpoch(ctx, 1) }},
		{"StartHint", func() error { _, err := c.StartHint(ctx); return err }},
		{"Release", func() error { return cl.Release(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := tc.call()
			elapsed := time.Since(start)
			if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), endpoint) {
				t.Fatalf("%v; want ErrUnavailable naming %s", err, endpoint)
			}
			if elapsed > callTimeout+time.Second {
				t.Fatalf("took %s with a %s call timeout", elapsed, callTimeout)
			}
		})
	}
}
