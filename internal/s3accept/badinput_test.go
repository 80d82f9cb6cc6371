package s3accept

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Bad S3 input exits with a documented code and a message naming what is
// wrong, the bucket and the endpoint, and never the secret key: an unknown
// bucket and wrong credentials (exit 5, the store refused), a key prefix
// with "..", an unknown URL scheme (exit 2, never read as a local path).
// The endpoint is named whether it came from walctl's setting or from the
// standard AWS_ENDPOINT_URL_S3.
func TestBadS3InputIsNamedWithoutTheSecret(t *testing.T) {
	s := newSite(t, "accept-bucket")
	wrongSecret := "wrong-" + s.srv.SecretKey[:12]
	viaSetting := []string{"AWS_ENDPOINT_URL_S3=", "WALCTL_S3_ENDPOINT=" + s.srv.Endpoint}
	cases := []struct {
		name, root string
		env        []string
		code       int
		want       []string
	}{
		{"unknown bucket", "s3://no-such-bucket/lake", nil, 5, []string{"no-such-bucket", s.srv.Endpoint, "does not exist"}},
		{"unknown bucket, endpoint setting", "s3://no-such-bucket/lake", viaSetting, 5, []string{"no-such-bucket", s.srv.Endpoint}},
		{"wrong secret", s.srv.URL("lake"), []string{"AWS_SECRET_ACCESS_KEY=" + wrongSecret}, 5, []string{s.srv.Bucket, s.srv.Endpoint, "secret"}},
		{"wrong secret, settings", s.srv.URL("lake"), append(viaSetting, "WALCTL_S3_ACCESS_KEY="+s.srv.AccessKey, "WALCTL_S3_SECRET_KEY="+wrongSecret), 5, []string{s.srv.Bucket, s.srv.Endpoint}},
		{"dot-dot prefix", s.srv.URL("lake/../other"), nil, 2, []string{`".."`, "lake/../other"}},
		{"unknown scheme", "gs://accept-bucket/lake", nil, 2, []string{`scheme "gs"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, verb := range [][]string{{"publish", "--table", "orders"}, {"doctor"}} {
				args := append(append([]string{"--data-dir", s.dataDir(), "--lance-root", c.root}, verb...), "--output", "json")
				r := s.run(verb[0], c.env, args...)
				if r.Code != c.code {
					t.Fatalf("%s: %s, want exit %d", verb[0], r, c.code)
				}
				for _, w := range c.want {
					if !strings.Contains(errText(r), w) {
						t.Errorf("%s: the error does not name %q:\n%s", verb[0], w, r.Stderr)
					}
				}
				mustNotLeak(t, verb[0], r.Stdout+r.Stderr, s.srv.SecretKey, wrongSecret)
			}
		})
	}
	// Nothing is read as a local path: quickstart (which used to create
	// ./s3:/bucket/lake and report success) leaves no directory behind.
	r := s.run("quickstart", nil, "quickstart", "--data-dir", s.dataDir(), "--lance-root", "gs://accept-bucket/lake", "--records", "10")
	if r.Code != 2 || !strings.Contains(r.Stderr, `scheme "gs"`) {
		t.Fatalf("quickstart with gs://: %s", r)
	}
	if _, err := os.Stat("gs:"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("quickstart left ./gs: behind: %v", err)
	}
}
