// Package health checks walctl's dependencies one by one for `walctl
// doctor`: each check reports its status, how long it took, what it found and,
// when it fails, a hint for the operator.
package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// Status values of a check.
const (
	OK   = "ok"
	Fail = "fail"
)

// Check is the outcome of one check.
type Check struct {
	Name    string        `json:"check"`
	Target  string        `json:"target"`
	Status  string        `json:"status"`
	Latency time.Duration `json:"latency_ns"`
	Detail  string        `json:"detail"`
	Hint    string        `json:"hint,omitempty"`
	Err     error         `json:"-"`
}

func finish(c Check, start time.Time, err error, hint string) Check {
	c.Latency = time.Since(start)
	if err != nil {
		c.Status, c.Err, c.Hint = Fail, err, hint
		if c.Detail == "" {
			c.Detail = err.Error()
		}
		return c
	}
	c.Status = OK
	return c
}

// Etcd asks one endpoint for its status (version, leader, raft index)
// within ctx's deadline. An endpoint that does not answer fails with an error
// wrapping errs.ErrUnavailable.
func Etcd(ctx context.Context, cli *clientv3.Client, endpoint string) Check {
	c := Check{Name: "etcd", Target: endpoint}
	start := time.Now()
	resp, err := cli.Status(ctx, endpoint)
	if err != nil {
		deadline := ""
		if d, ok := ctx.Deadline(); ok {
			deadline = fmt.Sprintf(" within %s", d.Sub(start).Round(time.Millisecond))
		}
		err = fmt.Errorf("etcd endpoint %s did not answer%s: %v: %w", endpoint, deadline, err, errs.ErrUnavailable)
		return finish(c, start, err, "check --etcd-endpoints (WALCTL_ETCD_ENDPOINTS) and that etcd runs, or use --embedded")
	}
	c.Detail = fmt.Sprintf("etcd %s, member %x, leader %x, raft term %d, db %d bytes",
		resp.Version, resp.Header.MemberId, resp.Leader, resp.RaftTerm, resp.DbSize)
	if resp.Leader == 0 {
		return finish(c, start, fmt.Errorf("etcd endpoint %s has no leader: %w", endpoint, errs.ErrUnavailable),
			"the cluster has lost quorum; check the other members")
	}
	return finish(c, start, nil, "")
}

// WritableDir checks that dir exists or can be created and that a file can be
// written, synced and removed in it.
func WritableDir(name, dir string) Check {
	c := Check{Name: name, Target: dir}
	start := time.Now()
	err := func() error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err := os.CreateTemp(dir, ".walctl-doctor-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := f.Write([]byte("walctl")); err != nil {
			return err
		}
		return f.Sync()
	}()
	if err != nil {
		return finish(c, start, err, "choose a writable directory with --"+name)
	}
	c.Detail = "writable"
	return finish(c, start, nil, "")
}

// Failed returns the first failed check's error, or nil.
func Failed(checks []Check) error {
	var failed []error
	for _, c := range checks {
		if c.Status == Fail {
			failed = append(failed, c.Err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d checks failed: %w", len(failed), len(checks), errors.Join(failed...))
}

// Abs returns an absolute form of p for display.
func Abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
