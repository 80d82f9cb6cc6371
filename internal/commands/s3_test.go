package commands

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// walctlS3 runs one in-process walctl with the S3 settings of endpoint and
// srv's keys in the environment (as an operator sets them).
func walctlS3(t *testing.T, srv *s3server.Server, endpoint string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("WALCTL_S3_ENDPOINT", endpoint)
	t.Setenv("WALCTL_S3_REGION", s3server.Region)
	t.Setenv("WALCTL_S3_ACCESS_KEY", srv.AccessKey)
	t.Setenv("WALCTL_S3_SECRET_KEY", srv.SecretKey)
	ios, _, out, errOut := cmdutil.Test()
	code := Run(context.Background(), ios, args)
	return code, out.String(), errOut.String()
}

// quickstart publishes into a bucket and verifies every record; the table
// is then read and verified from the bucket, and doctor finds the store
// honours conditional creates.
func TestQuickstartOnS3(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	data := t.TempDir()
	root := srv.URL("lake")
	code, out, errOut := walctlS3(t, srv, srv.Endpoint, "quickstart", "--records", "3000", "--batch-rows", "500", "--data-dir", data, "--lance-root", root, "--output", "json")
	if code != 0 || !strings.Contains(out, `"verified": true`) {
		t.Fatalf("quickstart on %s: exit %d\n%s\n%s", root, code, out, errOut)
	}
	// A preparer that died mid-upload leaves a multipart upload open under
	// the table's data/: the next owner aborts it after its fence.
	dead, err := objstore.NewS3(context.Background(), srv.Bucket, "lake/quickstart.lance", objstore.S3Options{
		Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dead.Create(context.Background(), "data/dead-attempt.lance")
	if err != nil {
		t.Fatal(err)
	}
	// More than its part buffers hold: an object within them would go as
	// one PutObject at Commit and leave no upload behind.
	if _, err := w.Write(make([]byte, objstore.DefaultPartBuffers*objstore.DefaultPartSize+1)); err != nil {
		t.Fatal(err)
	}
	if ups, err := dead.Uploads(context.Background(), "data"); err != nil || len(ups) != 1 {
		t.Fatalf("the dead attempt's upload: %+v, %v", ups, err)
	}
	code, out, errOut = walctlS3(t, srv, srv.Endpoint, "quickstart", "--records", "1000", "--batch-rows", "500", "--data-dir", data, "--lance-root", root, "--output", "json")
	if code != 0 || !strings.Contains(out, `"verified": true`) {
		t.Fatalf("second quickstart on %s: exit %d\n%s\n%s", root, code, out, errOut)
	}
	if ups, err := dead.Uploads(context.Background(), "data"); err != nil || len(ups) != 0 {
		t.Fatalf("uploads left after the next owner's fence: %+v, %v", ups, err)
	}
	code, out, errOut = walctlS3(t, srv, srv.Endpoint, "table", "read", "--table", "quickstart", "--count", "--data-dir", data, "--lance-root", root, "--output", "json")
	if code != 0 || !strings.Contains(out, `"row_count": 4000`) {
		t.Fatalf("table read from the bucket: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = walctlS3(t, srv, srv.Endpoint, "verify", "--table", "quickstart", "--data-dir", data, "--lance-root", root, "--output", "json")
	if code != 0 {
		t.Fatalf("verify on the bucket: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = walctlS3(t, srv, srv.Endpoint, "doctor", "--data-dir", data, "--lance-root", root, "--output", "json")
	if code != 0 || !strings.Contains(out, "honours conditional create") {
		t.Fatalf("doctor on the bucket: exit %d\n%s\n%s", code, out, errOut)
	}
	list, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &srv.Bucket, Prefix: aws.String("lake/quickstart.lance/_versions/")})
	if err != nil || len(list.Contents) < 2 {
		t.Fatalf("manifests in the bucket: %v, %v", list, err)
	}
	// Compact and clean on the bucket: the merged table reads and verifies,
	// and clean removed the old versions (all but its fence and the
	// compaction below it) and the files only they needed, and aborted the
	// upload another dead attempt left open after the compaction's fence (a
	// table that is never published again has no next owner to abort it).
	// Clean removes nothing younger than twice the claim TTL: 1 s asked
	// here, which etcd grants as 2 s, so the clean waits 4 s and a bit.
	for _, step := range [][]string{
		{"table", "compact", "--table", "quickstart"},
		{"table", "clean", "--table", "quickstart", "--older-than", "0s"},
		{"verify", "--table", "quickstart"},
		{"table", "read", "--table", "quickstart", "--count"},
		{"table", "history", "--table", "quickstart"},
	} {
		if step[1] == "clean" {
			w, err := dead.Create(context.Background(), "data/dead-attempt-2.lance")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(make([]byte, objstore.DefaultPartBuffers*objstore.DefaultPartSize+1)); err != nil {
				t.Fatal(err)
			}
			t.Setenv("WALCTL_CLAIM_TTL", "1s")
			time.Sleep(4500 * time.Millisecond)
		}
		code, out, errOut = walctlS3(t, srv, srv.Endpoint, append(step, "--data-dir", data, "--lance-root", root, "--output", "json")...)
		if code != 0 {
			t.Fatalf("%v on the bucket: exit %d\n%s\n%s", step, code, out, errOut)
		}
		switch step[1] {
		case "clean":
			if !strings.Contains(out, `"versions_kept": 2`) || strings.Contains(out, `"versions_removed": []`) || strings.Contains(out, `"files_removed": []`) {
				t.Fatalf("clean on the bucket removed nothing: %s", out)
			}
			if !strings.Contains(out, `"data/dead-attempt-2.lance"`) {
				t.Fatalf("clean did not report the dead attempt's upload aborted: %s", out)
			}
			if ups, err := dead.Uploads(context.Background(), "data"); err != nil || len(ups) != 0 {
				t.Fatalf("uploads left after clean: %+v, %v", ups, err)
			}
		case "read":
			if !strings.Contains(out, `"row_count": 4000`) {
				t.Fatalf("read after compact and clean: %s", out)
			}
		case "history":
			if !strings.Contains(out, `"operation": "compaction"`) {
				t.Fatalf("history after compact and clean: %s", out)
			}
		}
	}
}

// A store that ignores If-None-Match is refused by doctor and by a writer's
// start, naming the store and the override, exit 5; nothing is published.
func TestUnsafeStoreRefused(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	proxy := s3server.NewUnsafeProxy(t, srv)
	data := t.TempDir()
	root := srv.URL("lake")
	code, out, errOut := walctlS3(t, srv, proxy.Endpoint, "doctor", "--data-dir", data, "--lance-root", root, "--output", "json")
	if code != ExitUnavailable || !strings.Contains(out, `"check": "lance-store"`) || !strings.Contains(out+errOut, "If-None-Match: * succeeded") {
		t.Fatalf("doctor through the unsafe proxy: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = walctlS3(t, srv, proxy.Endpoint, "quickstart", "--records", "100", "--data-dir", data, "--lance-root", root)
	if code != ExitUnavailable || !strings.Contains(errOut, root) || !strings.Contains(errOut, cmdutil.KeyS3AllowUnsafe) {
		t.Fatalf("quickstart through the unsafe proxy: exit %d, want %d naming %s and %s\n%s\n%s", code, ExitUnavailable, root, cmdutil.KeyS3AllowUnsafe, out, errOut)
	}
	if strings.Contains(errOut, srv.SecretKey) {
		t.Fatal("the error shows the secret key")
	}
}
