package lance

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// getCounter is a reverse proxy in front of a real server that counts the
// GETs of keys under data/ (verification must not download data files),
// and the PUTs and multipart upload starts there (how a file was sent).
type getCounter struct {
	endpoint   string
	gets       atomic.Int64
	puts       atomic.Int64
	multiparts atomic.Int64
}

func newGetCounter(t *testing.T, srv *s3server.Server) *getCounter {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &getCounter{}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
		if !strings.Contains(pr.In.URL.Path, "/data/") {
			return
		}
		_, uploads := pr.In.URL.Query()["uploads"]
		switch {
		case pr.In.Method == http.MethodGet:
			c.gets.Add(1)
		case pr.In.Method == http.MethodPost && uploads:
			c.multiparts.Add(1)
		case pr.In.Method == http.MethodPut && pr.In.URL.Query().Get("uploadId") == "":
			c.puts.Add(1)
		}
	}}
	hs := httptest.NewServer(rp)
	t.Cleanup(hs.Close)
	c.endpoint = hs.URL
	return c
}

// countedTable is a table t.lance under lake/ of a fresh bucket, reached
// through a getCounter.
func countedTable(t *testing.T) (*s3server.Server, *getCounter, objstore.Store, *Dataset) {
	t.Helper()
	srv := s3server.Start(t, s3server.Options{})
	counter := newGetCounter(t, srv)
	st := s3Store(t, srv, counter.endpoint)
	d, err := CreateStore(st.Sub("t.lance"), small, CreateOptions{FileVersion: FileVersion2_0})
	if err != nil {
		t.Fatal(err)
	}
	return srv, counter, st, d
}

// Rule 7 on S3 is one HEAD per file: the store keeps the CRC-32C it
// computed from the bytes it received, and the verifier compares it (with
// size and ETag) to the descriptor without downloading the file. A file
// deleted, truncated, or replaced — with or without a checksum of its own,
// even with the ETag check left out — still fails verification.
func TestS3VerifyFileByChecksumCatchesTampering(t *testing.T) {
	srv, counter, st, d := countedTable(t)
	ctx := context.Background()
	key := func(desc Descriptor) string { return "lake/t.lance/" + desc.Path }
	get := func(desc Descriptor) []byte {
		out, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: &srv.Bucket, Key: aws.String(key(desc))})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		var b bytes.Buffer
		if _, err := b.ReadFrom(out.Body); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	// rawPut replaces the object with the test's own client (the SDK's
	// default checksum, not a CRC-32C).
	rawPut := func(desc Descriptor, b []byte) {
		if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: &srv.Bucket, Key: aws.String(key(desc)), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }
	cases := []struct {
		name      string
		tamper    func(Descriptor)
		dropETag  bool // verify with a descriptor that records no ETag
		want      error
		says      string
		downloads bool // the verifier has to read the object
	}{
		{"intact", func(Descriptor) {}, false, nil, "", false},
		{"deleted", func(desc Descriptor) { st.Delete(ctx, "t.lance/"+desc.Path) }, false, ErrMissingFile, ".lance", false},
		{"truncated", func(desc Descriptor) { rawPut(desc, get(desc)[:desc.Size-100]) }, false, ErrCorruptFile, "size", false},
		{"replaced, same size", func(desc Descriptor) { rawPut(desc, flip(get(desc))) }, false, ErrCorruptFile, "ETag", false},
		{"replaced, same size, no CRC-32C, no ETag recorded", func(desc Descriptor) { rawPut(desc, flip(get(desc))) }, true, ErrCorruptFile, "checksum", true},
		{"replaced with its own CRC-32C, no ETag recorded", func(desc Descriptor) {
			if err := st.Put(ctx, "t.lance/"+desc.Path, flip(get(desc))); err != nil {
				t.Fatal(err)
			}
		}, true, ErrCorruptFile, "the store's checksum", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := smallBatch(i*10, 10)
			desc := writeFile(t, d, r)
			r.Release()
			if desc.ETag == "" {
				t.Fatalf("the descriptor of an uploaded file records no ETag: %+v", desc)
			}
			tc.tamper(desc)
			if tc.dropETag {
				desc.ETag = ""
			}
			before := counter.gets.Load()
			err := d.VerifyFile(desc)
			if tc.want == nil && err != nil || tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says)) {
				t.Fatalf("verify: %v, want %v saying %q", err, tc.want, tc.says)
			}
			if got := counter.gets.Load() - before; (got > 0) != tc.downloads {
				t.Fatalf("verify sent %d GETs of data files, want downloads=%v", got, tc.downloads)
			}
		})
	}
}

// A data file larger than one part but within the writer's part buffers
// (two 8 MiB parts by default) goes as one PutObject, no multipart upload
// started; the store keeps the CRC-32C of the file the writer produced, so
// the intact file verifies with a HEAD, and a same-size replacement fails
// verification: on its ETag, and without the ETag on the store's checksum.
func TestS3FileWithinPartBuffersIsOnePut(t *testing.T) {
	_, counter, st, d := countedTable(t)
	r := smallBatch(0, 250_000)
	desc := writeFile(t, d, r)
	r.Release()
	if desc.Size <= objstore.DefaultPartSize || desc.Size >= 2*objstore.DefaultPartSize {
		t.Fatalf("the file has %d bytes, want between one and two parts of %d", desc.Size, objstore.DefaultPartSize)
	}
	if n, m := counter.puts.Load(), counter.multiparts.Load(); n != 1 || m != 0 {
		t.Fatalf("the file went as %d PUTs and %d multipart uploads, want one PUT", n, m)
	}
	if err := d.VerifyFile(desc); err != nil || counter.gets.Load() != 0 {
		t.Fatalf("verify the intact file: %v (%d GETs)", err, counter.gets.Load())
	}
	ctx := context.Background()
	b, err := st.Get(ctx, "t.lance/"+desc.Path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x01
	if err := st.Put(ctx, "t.lance/"+desc.Path, b); err != nil {
		t.Fatal(err)
	}
	if err := d.VerifyFile(desc); !errors.Is(err, ErrCorruptFile) || !strings.Contains(err.Error(), "ETag") {
		t.Fatalf("verify a replaced file: %v, want ErrCorruptFile on its ETag", err)
	}
	desc.ETag = ""
	if err := d.VerifyFile(desc); !errors.Is(err, ErrCorruptFile) || !strings.Contains(err.Error(), "the store's checksum") {
		t.Fatalf("verify a replaced file without the ETag: %v, want ErrCorruptFile on the store's checksum", err)
	}
}
