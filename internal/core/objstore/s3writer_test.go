package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// An object that fits the writer's part buffers goes as one PutObject: no
// multipart upload is started while it is written (none is listed before
// Commit) and the store's ETag is a plain one, not a multipart "…-N". One
// byte more starts a multipart upload before Commit, with several parts in
// flight when the writer has more than two buffers. Either way the store
// keeps the CRC-32C of exactly the bytes written, and they read back.
func TestS3WriterSinglePutWithinItsBuffers(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	for _, bufs := range []int{2, 4} {
		s := newS3(t, srv, fmt.Sprintf("lake%d", bufs), func(o *objstore.S3Options) { o.PartBuffers = bufs })
		fits := bufs * objstore.MinPartSize
		for _, tc := range []struct {
			n         int
			multipart bool
		}{{fits - 1, false}, {fits, true}, {2*fits + 777, true}} {
			t.Run(fmt.Sprintf("%d buffers, %d bytes", bufs, tc.n), func(t *testing.T) {
				want := pattern(tc.n)
				w, err := s.Create(ctx, "data/f.lance")
				if err != nil {
					t.Fatal(err)
				}
				if w.BufferBytes() != fits {
					t.Fatalf("BufferBytes %d, want %d (every part buffer)", w.BufferBytes(), fits)
				}
				for off := 0; off < tc.n; off += 1 << 20 {
					if _, err := w.Write(want[off:min(off+1<<20, tc.n)]); err != nil {
						t.Fatal(err)
					}
				}
				ups, err := s.Uploads(ctx, "data")
				if err != nil || (len(ups) == 1) != tc.multipart || len(ups) > 1 {
					t.Fatalf("multipart uploads before Commit: %+v, %v; want one: %v", ups, err, tc.multipart)
				}
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				if etag := w.Committed().ETag; strings.Contains(etag, "-") != tc.multipart {
					t.Fatalf("ETag %s: multipart=%v, want %v", etag, strings.Contains(etag, "-"), tc.multipart)
				}
				if ups, err := s.Uploads(ctx, "data"); err != nil || len(ups) != 0 {
					t.Fatalf("uploads left after Commit: %+v, %v", ups, err)
				}
				checkStoredChecksum(t, s, true, w.Committed(), want)
				r, err := s.Open(ctx, "data/f.lance")
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("read back %d of %d bytes, equal=%v, %v", len(got), tc.n, bytes.Equal(got, want), err)
				}
				if err := s.Delete(ctx, "data/f.lance"); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
