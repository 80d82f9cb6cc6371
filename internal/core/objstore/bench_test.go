package objstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// BenchmarkS3WriterVsPutObject uploads the same 64 MiB to the same loopback
// versitygw twice per iteration: through the store's streaming writer (with
// each part size and part buffer count; 64 MiB does not fit the buffers,
// so it is a multipart upload) and as one PutObject (the store's Put, with
// its CRC-32C, as `bench publish`'s raw baseline), and reports the writer's
// throughput as a ratio of the single PUT's (writer/raw), measured within
// the same iteration.
func BenchmarkS3WriterVsPutObject(b *testing.B) {
	srv := s3server.Start(b, s3server.Options{})
	data := pattern(64 << 20)
	ctx := context.Background()
	for _, c := range []struct{ part, bufs int }{{8 << 20, 2}, {8 << 20, 4}, {16 << 20, 2}, {16 << 20, 4}} {
		b.Run(fmt.Sprintf("part=%dMiB,buffers=%d", c.part>>20, c.bufs), func(b *testing.B) {
			s := newS3(b, srv, "bench", func(o *objstore.S3Options) { o.PartSize, o.PartBuffers = c.part, c.bufs })
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
				if err := s.Put(ctx, "raw.lance", data); err != nil {
					b.Fatal(err)
				}
				put += time.Since(start)
			}
			b.ReportMetric(put.Seconds()/writer.Seconds(), "writer/raw")
		})
	}
}
