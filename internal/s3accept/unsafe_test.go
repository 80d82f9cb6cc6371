package s3accept

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/testutil/s3server"
)

// A store that ignores If-None-Match (the real server behind a proxy that
// drops the header) is detected by doctor and by every writer at start,
// which refuse it naming the store and the setting that would override it;
// no table is written. The same bucket straight from the server passes.
func TestUnsafeStoreIsRefusedByDoctorAndWriters(t *testing.T) {
	s := newSite(t, "unsafe-bucket")
	p := s3server.NewUnsafeProxy(t, s.srv)
	viaProxy := []string{"AWS_ENDPOINT_URL_S3=" + p.Endpoint}
	root := s.srv.URL("lake")
	dd := s.dataDir()

	r := s.run("doctor", viaProxy, "--data-dir", dd, "--lance-root", root, "doctor")
	if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "lance-store") {
		t.Fatalf("doctor through the unsafe proxy: %s", r)
	}
	for _, w := range []string{root, "If-None-Match", "s3.allow_unsafe_store"} {
		if !strings.Contains(r.Stdout+r.Stderr, w) {
			t.Errorf("doctor does not name %q:\n%s", w, r)
		}
	}
	for _, verb := range [][]string{
		{"quickstart", "--records", "100"},
		{"publish", "--table", "quickstart"},
		{"worker", "run", "--tables", "quickstart"},
	} {
		r := s.run(verb[0], viaProxy, append([]string{"--data-dir", dd, "--lance-root", root}, verb...)...)
		if r.Code != 5 || !strings.Contains(r.Stderr, "s3.allow_unsafe_store") || !strings.Contains(r.Stderr, root) {
			t.Errorf("%s through the unsafe proxy: %s, want exit 5 naming %s and s3.allow_unsafe_store", verb[0], r, root)
		}
		mustNotLeak(t, verb[0], r.Stdout+r.Stderr, s.srv.SecretKey)
	}
	if p.Dropped() == 0 {
		t.Fatal("no conditional put went through the proxy: the refusals were not the probe's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := s.srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.srv.Bucket), Prefix: aws.String("lake/quickstart.lance/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 0 {
		t.Fatalf("a refused writer wrote %d objects of the table, first %s", len(list.Contents), aws.ToString(list.Contents[0].Key))
	}

	// Control: the same bucket, straight from the server, passes the probe.
	r = s.run("doctor", nil, "--data-dir", s.dataDir(), "--lance-root", root, "--output", "json", "doctor")
	var checks struct {
		Checks []struct{ Check, Status string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &checks); err != nil || r.Code != 0 {
		t.Fatalf("doctor on the real server: %v: %s", err, r)
	}
	found := false
	for _, c := range checks.Checks {
		found = found || (c.Check == "lance-store" && c.Status == "ok")
	}
	if !found {
		t.Fatalf("doctor on the real server: no passing lance-store check: %s", r)
	}
}
