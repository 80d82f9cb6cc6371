package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/failpoint"
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

// The s3-after-part failpoint fires in a multipart upload once part N is
// answered, never for an object sent by one PutObject; a writer failing
// there aborts its upload on Commit, leaving no upload and no object.
func TestS3WriterFailpointAfterPart(t *testing.T) {
	defer failpoint.Reset()
	if err := failpoint.Enable(failpoint.S3AfterPart+"=error@1", ""); err != nil {
		t.Fatal(err)
	}
	srv := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	s := newS3(t, srv, "lake", func(o *objstore.S3Options) { o.PartSize = objstore.MinPartSize })
	fits := 2 * objstore.MinPartSize
	for _, tc := range []struct {
		n         int
		multipart bool
	}{{fits - 1, false}, {fits + objstore.MinPartSize + 1, true}} {
		w, err := s.Create(ctx, "data/f.lance")
		if err != nil {
			t.Fatal(err)
		}
		_, werr := w.Write(pattern(tc.n))
		err = errors.Join(werr, w.Commit())
		if errors.Is(err, failpoint.ErrInjected) != tc.multipart {
			t.Fatalf("%d bytes: Write and Commit: %v; want the injected error: %v", tc.n, err, tc.multipart)
		}
		if ups, err := s.Uploads(ctx, "data"); err != nil || len(ups) != 0 {
			t.Fatalf("%d bytes: uploads left: %+v, %v", tc.n, ups, err)
		}
		_, err = s.Stat(ctx, "data/f.lance")
		if exists := err == nil; exists == tc.multipart {
			t.Fatalf("%d bytes: object exists %v (%v)", tc.n, exists, err)
		}
		if err == nil {
			if err := s.Delete(ctx, "data/f.lance"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
