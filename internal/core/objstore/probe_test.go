package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

func TestProbeAcceptsStoresThatHonourConditions(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if err := objstore.Probe(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			noProbeObjects(t, s)
		})
	}
}

func TestProbeRefusesAStoreThatIgnoresIfNoneMatch(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	proxy := s3server.NewUnsafeProxy(t, srv)
	s, err := objstore.NewS3(context.Background(), srv.Bucket, "lake", objstore.S3Options{
		Endpoint: proxy.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = objstore.Probe(context.Background(), s)
	if !errors.Is(err, objstore.ErrUnsafeStore) || !strings.Contains(err.Error(), "s3://"+srv.Bucket+"/lake") || !strings.Contains(err.Error(), "If-None-Match") {
		t.Fatalf("probe through a proxy dropping If-None-Match: %v, want ErrUnsafeStore naming the store and If-None-Match", err)
	}
	if proxy.Dropped() < 2 {
		t.Fatalf("the proxy dropped If-None-Match from %d requests: the probe did not ask for conditional creates", proxy.Dropped())
	}
	noProbeObjects(t, newS3(t, srv, "lake"))
}

// Plans and attempts are retired by compare-and-delete (DeleteIfMatch on
// the ETag read): a store that ignores If-Match on DELETE would let a
// stale retirement remove a record pinned anew. The probe refuses it,
// naming the store and the condition, even though it honours
// If-None-Match.
func TestProbeRefusesAStoreThatIgnoresIfMatchOnDelete(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	proxy := s3server.NewUnsafeProxy(t, srv, s3server.IfMatchOnDelete)
	s := newS3(t, srv, "lake", func(o *objstore.S3Options) { o.Endpoint = proxy.Endpoint })
	err := objstore.Probe(context.Background(), s)
	msg := fmt.Sprint(err)
	if !errors.Is(err, objstore.ErrUnsafeStore) || !strings.Contains(msg, "s3://"+srv.Bucket+"/lake") ||
		!strings.Contains(msg, "If-Match") || strings.Contains(msg, "If-None-Match") {
		t.Fatalf("probe through a proxy dropping If-Match from DELETE: %v, want ErrUnsafeStore naming the store and If-Match (not If-None-Match)", err)
	}
	if n := proxy.DroppedOf(s3server.IfMatchOnDelete); n < 1 {
		t.Fatalf("the proxy dropped If-Match from %d deletes: the probe did not ask for a compare-and-delete", n)
	}
	noProbeObjects(t, newS3(t, srv, "lake"))
}

// noProbeObjects fails the test if a probe left objects in s.
func noProbeObjects(t *testing.T, s objstore.Store) {
	t.Helper()
	list, err := s.ListTree(context.Background(), objstore.ProbeDir)
	if err != nil || len(list) != 0 {
		t.Fatalf("probe objects left behind: %+v, %v", list, err)
	}
}

func TestLostAnswerIsUnknownOutcomeNotARetry(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	p := s3server.NewLossyProxy(t, srv)
	s, err := objstore.NewS3(context.Background(), srv.Bucket, "lake", objstore.S3Options{
		Endpoint: p.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p.Arm("_versions/")
	err = s.PutIfAbsent(ctx, "t.lance/_versions/2.manifest", []byte("mine"), nil)
	if !errors.Is(err, objstore.ErrUnknownOutcome) || errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent whose answer was lost: %v, want ErrUnknownOutcome (and no retry read as a lost race)", err)
	}
	p.Arm("")
	if b, err := s.Get(ctx, "t.lance/_versions/2.manifest"); err != nil || string(b) != "mine" {
		t.Fatalf("re-reading resolves the outcome: %q, %v", b, err)
	}
}

func TestBadBucketAndKeysNameTheStoreNotTheSecret(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	for _, c := range []struct{ name, bucket, secret string }{
		{"unknown bucket", "no-such-bucket", srv.SecretKey},
		{"wrong secret", srv.Bucket, "wrong-secret-d41d8cd98f"},
	} {
		s, err := objstore.NewS3(ctx, c.bucket, "lake", objstore.S3Options{
			Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: c.secret,
		})
		if err != nil {
			t.Fatal(err)
		}
		err = objstore.Probe(ctx, s)
		if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), c.bucket) || !strings.Contains(err.Error(), srv.Endpoint) {
			t.Fatalf("%s: %v, want a dependency error naming bucket %s and endpoint %s", c.name, err, c.bucket, srv.Endpoint)
		}
		if strings.Contains(err.Error(), c.secret) {
			t.Fatalf("%s: the error shows the secret: %v", c.name, err)
		}
	}
}

func TestParseRoot(t *testing.T) {
	good := map[string]objstore.Root{
		"s3://bucket-one/lake":   {Bucket: "bucket-one", Prefix: "lake"},
		"s3://bucket-one/a/b/":   {Bucket: "bucket-one", Prefix: "a/b"},
		"s3://bucket-one":        {Bucket: "bucket-one"},
		"/var/lib/walctl/tables": {Dir: "/var/lib/walctl/tables"},
		"tables":                 {Dir: "tables"},
		"./odd:name":             {Dir: "./odd:name"},
	}
	for in, want := range good {
		if got, err := objstore.ParseRoot(in); err != nil || got != want {
			t.Errorf("ParseRoot(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"gs://bucket-one/lake", "http://host/lake", "file:///tmp/x", "file:x", "S3A://bucket-one/x",
		"s3://bucket-one/a/../b", "s3://bucket-one/..", "s3://bucket-one/a//b", "s3://B1/x", "s3:bucket-one", ""} {
		_, err := objstore.ParseRoot(in)
		if !errors.Is(err, objstore.ErrUnsupportedRoot) || !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("ParseRoot(%q): %v, want ErrUnsupportedRoot (invalid input)", in, err)
		}
	}
}

// A server that stops answering (SIGSTOP) mid-commit: the conditional
// create runs out of its call timeout and is an unknown outcome, not a
// lost race and not retried; once the server runs again, re-reading tells.
func TestStalledServerIsUnknownOutcome(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	s, err := objstore.NewS3(context.Background(), srv.Bucket, "lake", objstore.S3Options{
		Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		CallTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.Stop() // returns once the server is stopped
	err = s.PutIfAbsent(ctx, "t.lance/_versions/2.manifest", []byte("mine"), nil)
	srv.Cont()
	if !errors.Is(err, objstore.ErrUnknownOutcome) || errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent to a stalled server: %v, want ErrUnknownOutcome", err)
	}
	b, err := s.Get(ctx, "t.lance/_versions/2.manifest")
	switch {
	case err == nil && string(b) != "mine":
		t.Fatalf("re-read found %q", b)
	case err != nil && !errors.Is(err, objstore.ErrNotFound):
		t.Fatalf("re-read after the server resumed: %v", err)
	}
}

// Writers starting together probe one new prefix at once: each probe
// still tells a safe store from an unsafe one (a real server answers a
// create racing another in a new directory with a conflict now and then).
func TestConcurrentProbesOfANewPrefix(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	for round := range 40 {
		prefix := "race-" + strconv.Itoa(round)
		errCh := make(chan error, 6)
		for range 6 {
			go func() {
				s, err := objstore.NewS3(context.Background(), srv.Bucket, prefix, objstore.S3Options{
					Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
				})
				if err == nil {
					err = objstore.Probe(context.Background(), s)
				}
				errCh <- err
			}()
		}
		for range 6 {
			if err := <-errCh; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
