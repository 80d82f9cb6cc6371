package s3accept

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/testutil/proc"
	"github.com/walctl/walctl/internal/testutil/s3server"
	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

// walctlBin is the walctl binary built once by TestMain.
var walctlBin string

func TestMain(m *testing.M) { walctlbin.Main(m, &walctlBin) }

// site is one test's S3 server and walctl runner: every walctl process
// gets the server's keys and endpoint through the standard AWS environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
// AWS_ENDPOINT_URL_S3) plus path-style addressing, and a data directory of
// its own unless the test shares one.
type site struct {
	t     *testing.T
	srv   *s3server.Server
	procs *proc.Runner
}

func newSite(t *testing.T, bucket string) *site {
	t.Helper()
	srv := s3server.Start(t, s3server.Options{Bucket: bucket})
	env := append(srv.Env(), "WALCTL_S3_PATH_STYLE=true", "WALCTL_LOG_LEVEL=warn")
	return &site{t: t, srv: srv, procs: proc.NewRunner(walctlBin, t.TempDir(), env...)}
}

// run runs walctl to completion with extra env (NAME=value, later wins).
func (s *site) run(name string, env []string, args ...string) proc.Result {
	s.t.Helper()
	return s.procs.Run(s.t, name, env, args...)
}

// dataDir is a fresh data directory for one walctl process or a group
// sharing it.
func (s *site) dataDir() string {
	return filepath.Join(s.t.TempDir(), "data")
}

// mustNotLeak fails the test if out shows a secret.
func mustNotLeak(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(out, sec) {
			t.Fatalf("%s shows a secret %q:\n%s", what, sec, out)
		}
	}
}

// errText is the message of a failed command: the "message" of its JSON
// error (--output json) or its stderr as is.
func errText(r proc.Result) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(r.Stderr)), &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return r.Stderr
}
