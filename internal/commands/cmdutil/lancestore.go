package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/walctl/walctl/internal/core/objstore"
)

// Settings of tables on S3-compatible object storage (--lance-root
// s3://bucket/prefix). Empty values fall back to the standard AWS chain
// (AWS_* environment, shared config and credentials files, roles).
const (
	KeyS3Endpoint    = "s3.endpoint"
	KeyS3Region      = "s3.region"
	KeyS3PathStyle   = "s3.path_style"
	KeyS3AccessKey   = "s3.access_key"
	KeyS3SecretKey   = "s3.secret_key"
	KeyS3AllowUnsafe = "s3.allow_unsafe_store"
)

func init() {
	Register(
		Setting{Key: KeyS3Endpoint, Default: "", Usage: "S3 endpoint URL for an s3:// lance root (default: AWS, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)"},
		Setting{Key: KeyS3Region, Default: "", Usage: "S3 signing region (default: AWS_REGION or the shared config, else us-east-1)"},
		Setting{Key: KeyS3PathStyle, Default: "auto", Usage: "S3 path-style addressing: auto|true|false (auto: on when an endpoint is set, as S3-compatible servers need)"},
		Setting{Key: KeyS3AccessKey, Default: "", Usage: "S3 access key id (default: the AWS credential chain)"},
		Setting{Key: KeyS3SecretKey, Secret: true, Default: "", Usage: "S3 secret access key (env WALCTL_S3_SECRET_KEY or config file; default: the AWS credential chain)"},
		Setting{Key: KeyS3AllowUnsafe, Default: false, Usage: "write to a store that ignores If-None-Match: * on PUT or If-Match on DELETE (UNSAFE: two writers can both commit one version, a stale retirement can remove a plan pinned anew)"},
	)
}

// resolveLanceRoot parses --lance-root: empty is <data-dir>/tables, a path
// is made absolute, s3://bucket/prefix is kept; any other scheme, a bad
// bucket name or a prefix with ".." is a usage error (exit 2).
func resolveLanceRoot(g *Global) error {
	if g.LanceRoot == "" {
		g.LanceRoot = filepath.Join(g.DataDir, "tables")
	}
	loc, err := objstore.ParseRoot(g.LanceRoot)
	if err != nil {
		return FlagErrorf("--lance-root: %v", err)
	}
	if !loc.IsS3() {
		if abs, err := filepath.Abs(loc.Dir); err == nil {
			loc.Dir = abs
		}
	}
	g.LanceRoot, g.LanceLocation = loc.String(), loc
	return nil
}

// S3Options returns the S3 settings, for an s3:// lance root.
func (f *Factory) S3Options() (objstore.S3Options, error) {
	c := f.Config
	o := objstore.S3Options{
		Endpoint: c.String(KeyS3Endpoint), Region: c.String(KeyS3Region),
		AccessKey: c.String(KeyS3AccessKey), SecretKey: c.String(KeyS3SecretKey),
		CallTimeout: f.Timeout(),
	}
	switch ps := c.String(KeyS3PathStyle); ps {
	case "auto":
		o.PathStyle = o.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	case "true", "false":
		o.PathStyle = ps == "true"
	default:
		return o, FlagErrorf("%s must be auto, true or false, not %q", KeyS3PathStyle, ps)
	}
	return o, nil
}

// LanceStore returns the store of the lance root (a directory or an S3
// prefix). It sends no request.
func (f *Factory) LanceStore(ctx context.Context) (objstore.Store, error) {
	o, err := f.S3Options()
	if err != nil {
		return nil, err
	}
	return objstore.Open(ctx, f.Config.Global.LanceLocation, o)
}

// ErrUnsafeStoreAllowed marks a probe failure that s3.allow_unsafe_store
// overrode: doctor reports it as a warning, writers go on.
var ErrUnsafeStoreAllowed = errors.New("unsafe store allowed by " + KeyS3AllowUnsafe)

// ProbeLanceStore checks that the lance root honours conditional creates
// and compare-and-delete (objstore.Probe), as every writer does at its
// start and doctor does. A store that does not is refused, naming the
// store, the condition and the setting that overrides it; with the
// override the error wraps ErrUnsafeStoreAllowed instead. Any other
// failure (unreachable, bucket, keys) is returned as is.
func (f *Factory) ProbeLanceStore(ctx context.Context) error {
	s, err := f.LanceStore(ctx)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, f.Timeout())
	defer cancel()
	err = objstore.Probe(pctx, s)
	if !errors.Is(err, objstore.ErrUnsafeStore) {
		return err
	}
	if f.Config.Bool(KeyS3AllowUnsafe) {
		return fmt.Errorf("%w: %w", ErrUnsafeStoreAllowed, err)
	}
	return fmt.Errorf("%w; refusing to write (set %s=true, env WALCTL_S3_ALLOW_UNSAFE_STORE, only if a single writer is guaranteed otherwise)", err, KeyS3AllowUnsafe)
}

// RootStore is the lance root a verb reads: store when the verb's RunE
// filled it from LanceStore, else the local directory dir (tests of xRun
// fill only the directory).
func RootStore(store objstore.Store, dir string) objstore.Store {
	if store != nil {
		return store
	}
	return objstore.NewLocal(dir)
}
