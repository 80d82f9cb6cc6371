package objstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// BenchmarkS3WriterVsPutObject uploads the same bytes to the same loopback
// versitygw twice per iteration: through the store's streaming writer
// (multipart, one part buffer) and as one raw PutObject, and reports the
// writer's throughput as a ratio of the raw one (writer/raw).
func BenchmarkS3WriterVsPutObject(b *testing.B) {
	srv := s3server.Start(b, s3server.Options{})
	s, err := objstore.NewS3(context.Background(), srv.Bucket, "bench", objstore.S3Options{
		Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := srv.Client()
	data := pattern(64 << 20)
	ctx := context.Background()
	var writer, put time.Duration
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		start := time.Now()
		w, err := s.Create(ctx, "w.lance")
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < len(data); off += 1 << 20 {
			if _, err := w.Write(data[off : off+1<<20]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		writer += time.Since(start)
		start = time.Now()
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &srv.Bucket, Key: aws.String("bench/raw.lance"),
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}); err != nil {
			b.Fatal(err)
		}
		put += time.Since(start)
	}
	b.ReportMetric(put.Seconds()/writer.Seconds(), "writer/raw")
}
