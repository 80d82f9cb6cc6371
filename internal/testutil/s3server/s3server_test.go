package s3server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func putIfAbsent(ctx context.Context, c *s3.Client, bucket, key, body string) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader(body), IfNoneMatch: aws.String("*"),
	})
	return err
}

func get(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.GetObject(testCtx(t), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// The real server refuses a second create-if-absent of one key: the
// property every Lance commit on S3 rests on.
func TestServerHonoursIfNoneMatch(t *testing.T) {
	s := Start(t, Options{})
	ctx, c := testCtx(t), s.Client()
	if err := putIfAbsent(ctx, c, s.Bucket, "_versions/1.manifest", "first"); err != nil {
		t.Fatal(err)
	}
	err := putIfAbsent(ctx, c, s.Bucket, "_versions/1.manifest", "second")
	if code := apiCode(err); code != "PreconditionFailed" {
		t.Fatalf("second conditional put: %v (code %q), want PreconditionFailed", err, code)
	}
	if got := get(t, c, s.Bucket, "_versions/1.manifest"); got != "first" {
		t.Fatalf("object = %q after a refused put, want %q", got, "first")
	}
}

// Keys are the server's: a client with another secret is refused.
func TestServerRefusesWrongKeys(t *testing.T) {
	s := Start(t, Options{Bucket: "bucket-keys"})
	c := ClientFor(s.Endpoint, s.AccessKey, "not-"+s.SecretKey)
	_, err := c.HeadBucket(testCtx(t), &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)})
	if err == nil {
		t.Fatal("HeadBucket with a wrong secret succeeded")
	}
	if _, err := s.Client().HeadBucket(testCtx(t), &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatalf("HeadBucket with the right keys: %v", err)
	}
}

// A SIGKILLed server serves nothing; restarted on its directory it serves
// what it had stored, on the same endpoint and keys.
func TestKillAndRestartKeepTheData(t *testing.T) {
	s := Start(t, Options{})
	ctx, c := testCtx(t), s.Client()
	if err := putIfAbsent(ctx, c, s.Bucket, "k", "kept"); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	s.Kill()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)}); err == nil {
		t.Fatal("a killed server answered")
	}
	s.Restart()
	if s.Pid() == pid {
		t.Fatal("restart kept the old process")
	}
	if got := get(t, c, s.Bucket, "k"); got != "kept" {
		t.Fatalf("after restart k = %q, want %q", got, "kept")
	}
	if err := putIfAbsent(ctx, c, s.Bucket, "k", "again"); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("conditional put over a kept key after restart: %v, want PreconditionFailed", err)
	}
}

// Through the unsafe proxy a second create-if-absent silently overwrites
// the first (what a store ignoring the condition does), while the client
// did ask for the condition both times.
func TestUnsafeProxyIgnoresIfNoneMatch(t *testing.T) {
	s := Start(t, Options{})
	p := NewUnsafeProxy(t, s)
	ctx, c := testCtx(t), ClientFor(p.Endpoint, s.AccessKey, s.SecretKey)
	for _, body := range []string{"first", "second"} {
		if err := putIfAbsent(ctx, c, s.Bucket, "_versions/1.manifest", body); err != nil {
			t.Fatalf("conditional put of %q through the proxy: %v", body, err)
		}
	}
	if got := get(t, s.Client(), s.Bucket, "_versions/1.manifest"); got != "second" {
		t.Fatalf("object = %q, want the overwrite %q", got, "second")
	}
	if n := p.Dropped(); n != 2 {
		t.Fatalf("proxy dropped If-None-Match %d times, want 2", n)
	}
	// Reads and unconditional writes pass through untouched.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("plain"), Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, s.Bucket, "plain"); got != "x" || p.Dropped() != 2 {
		t.Fatalf("plain object %q, dropped %d", got, p.Dropped())
	}
}

// A proxy made to strip If-Match from deletes lets a compare-and-delete
// with a stale ETag remove the object that replaced the one read (the real
// server refuses it), and leaves creates' If-None-Match alone.
func TestUnsafeProxyIgnoresIfMatchOnDelete(t *testing.T) {
	s := Start(t, Options{})
	p := NewUnsafeProxy(t, s, IfMatchOnDelete)
	ctx, c := testCtx(t), ClientFor(p.Endpoint, s.AccessKey, s.SecretKey)
	put := func(body string) string {
		t.Helper()
		out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("plans/k.json"), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ETag)
	}
	deleteIfMatch := func(c *s3.Client, etag string) error {
		_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("plans/k.json"), IfMatch: aws.String(etag)})
		return err
	}
	stale := put("first")
	put("second")
	if err := deleteIfMatch(s.Client(), stale); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("stale compare-and-delete straight to the server: %v, want PreconditionFailed", err)
	}
	if err := deleteIfMatch(c, stale); err != nil {
		t.Fatalf("stale compare-and-delete through the proxy: %v", err)
	}
	if _, err := s.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("plans/k.json")}); err == nil {
		t.Fatal("the replaced object survived a stale compare-and-delete through the proxy")
	}
	if n := p.DroppedOf(IfMatchOnDelete); n != 1 {
		t.Fatalf("proxy dropped If-Match %d times, want 1", n)
	}
	// Creates keep their condition through this proxy.
	if err := putIfAbsent(ctx, c, s.Bucket, "_versions/1.manifest", "first"); err != nil {
		t.Fatal(err)
	}
	if err := putIfAbsent(ctx, c, s.Bucket, "_versions/1.manifest", "second"); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("second create through a proxy stripping only If-Match: %v, want PreconditionFailed", err)
	}
	if p.DroppedOf(IfNoneMatchOnCreate) != 0 || p.Dropped() != 1 {
		t.Fatalf("dropped If-None-Match %d, in all %d; want 0 and 1", p.DroppedOf(IfNoneMatchOnCreate), p.Dropped())
	}
}
