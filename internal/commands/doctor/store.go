package doctor

import (
	"context"
	"errors"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/health"
)

// storeChecks checks the lance root: a local directory must be writable;
// every root, local or S3, must honour conditional creates, and an S3 root
// compare-and-delete (the probe writers run at start), or Lance commits
// and the retirement of plans and attempts are unsafe.
func storeChecks(ctx context.Context, opts *Options) []health.Check {
	var out []health.Check
	if !opts.Global.LanceLocation.IsS3() {
		out = append(out, health.WritableDir("lance-root", opts.Global.LanceRoot))
		if out[0].Status == health.Fail {
			return out
		}
	}
	if opts.ProbeStore == nil {
		return out
	}
	c := health.Check{Name: "lance-store", Target: opts.Global.LanceRoot}
	start := time.Now()
	err := opts.ProbeStore(ctx)
	c.Latency = time.Since(start)
	switch {
	case err == nil:
		c.Status, c.Detail = health.OK, "honours conditional create (If-None-Match: *)"
		if opts.Global.LanceLocation.IsS3() {
			c.Detail += " and compare-and-delete (If-Match on DELETE)"
		}
	case errors.Is(err, cmdutil.ErrUnsafeStoreAllowed):
		c.Status, c.Detail = health.OK, "UNSAFE, allowed by "+cmdutil.KeyS3AllowUnsafe+": "+err.Error()
	default:
		c.Status, c.Err, c.Detail = health.Fail, err, err.Error()
		c.Hint = "check the bucket, endpoint and keys (" + cmdutil.KeyS3Endpoint + ", " + cmdutil.KeyS3AccessKey + ", AWS_*), or use a store that honours If-None-Match and If-Match"
	}
	return append(out, c)
}
