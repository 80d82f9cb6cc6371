package publish

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// Rule 7 on a real S3 server: a prepared data file deleted, truncated or
// replaced (same size, one byte flipped) in the bucket between prepare
// and commit fails the HEAD-and-checksum verification, by the preparer as
// by a successor; the attempt is retired, a new attempt writes new files,
// and every record is published exactly once. An intact attempt is
// reused by a successor.
func TestDamagedPreparedFilesOnS3ArePreparedAgain(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	cli := srv.Client()
	body := func(ctx context.Context, key string) []byte {
		out, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: &srv.Bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(ctx context.Context, key string, b []byte) error {
		_, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader(b)})
		return err
	}
	for _, tc := range []struct {
		name      string
		successor bool
		damage    func(ctx context.Context, key string) error
	}{
		{"deleted-same-owner", false, func(ctx context.Context, key string) error {
			_, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &srv.Bucket, Key: aws.String(key)})
			return err
		}},
		{"truncated-successor", true, func(ctx context.Context, key string) error {
			b := body(ctx, key)
			return put(ctx, key, b[:len(b)-1])
		}},
		{"flipped-successor", true, func(ctx context.Context, key string) error {
			b := body(ctx, key)
			b[len(b)/2] ^= 0xff
			return put(ctx, key, b)
		}},
		{"intact-successor", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := objstore.NewS3(context.Background(), srv.Bucket, tc.name, objstore.S3Options{
				Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, 1)
			e.produce(0, 6, 32)
			onS3 := func(c *Config) { c.Store = st }
			a, err := e.publisherWith("a", onS3).Acquire(e.ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			prep, err := a.Prepare(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				if err := tc.damage(e.ctx, tc.name+"/orders.lance/"+prep.Files[0]); err != nil {
					t.Fatal(err)
				}
			}
			s := a
			if tc.successor {
				if err := a.Release(e.ctx); err != nil {
					t.Fatal(err)
				}
				if s, err = e.publisherWith("b", onS3).Acquire(e.ctx, "orders"); err != nil {
					t.Fatal(err)
				}
			}
			defer s.Release(context.Background())
			res, err := s.Round(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage == nil {
				if !res.Reused || res.Attempt != prep.Attempt || res.Outcome != OutcomePublished {
					t.Fatalf("an intact attempt was not reused: %+v", res)
				}
				e.exactlyOnce(e.tableIDsOn(st))
				return
			}
			if res.Reused || res.Attempt == prep.Attempt || res.Outcome != OutcomePublished {
				t.Fatalf("damaged attempt was reused: %+v", res)
			}
			for _, f := range res.Files {
				for _, old := range prep.Files {
					if f == old {
						t.Fatalf("published a damaged attempt's file %s", f)
					}
				}
			}
			e.exactlyOnce(e.tableIDsOn(st))
		})
	}
}

// An S3 writer's part buffers stay charged to the memory budget until its
// file is closed: finishing a file frees the encoder workspace and the
// writer's slot, but Close still uploads the last parts from those
// buffers. Three files of several parts each, streamed two at a time.
func TestS3PartBuffersStayChargedUntilClose(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	st, err := objstore.NewS3(context.Background(), srv.Bucket, "charged", objstore.S3Options{
		Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: 5 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 1)
	e.produce(0, 40, 20000)
	b := budget.New(256 << 20)
	p := e.publisherWith("w", func(c *Config) {
		c.Store, c.PipelinePreparation, c.StreamFiles, c.Budget = st, true, 2, b
		c.Limits.FileBytes = 12 << 20
	})
	var mu sync.Mutex
	var closing []int64
	p.cfg.hooks = &prepareHooks{closing: func(int) {
		mu.Lock()
		closing = append(closing, b.Reserved())
		mu.Unlock()
	}}
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	drain(t, e.ctx, s)
	e.exactlyOnce(e.tableIDsOn(st))
	want := int64(objstore.DefaultPartBuffers) * (5 << 20)
	if len(closing) < 3 {
		t.Fatalf("%d files closed, want at least 3", len(closing))
	}
	for i, n := range closing {
		if n < want {
			t.Fatalf("file %d was closed with %d bytes of the budget reserved, less than its writer's part buffers (%d)", i, n, want)
		}
	}
	idle(t, p)
}
