package s3server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// UnsafeProxy is a reverse proxy in front of a real server that behaves
// like an S3-compatible store ignoring conditional writes
// (lance-format/lance#4205): it drops If-None-Match from every PUT and POST
// (PutObject, CompleteMultipartUpload), so a second create-if-absent of one
// key overwrites the first instead of failing with 412. Because the header
// is part of the SigV4 signature, the proxy signs the forwarded request
// again with the server's keys; everything else passes unchanged.
type UnsafeProxy struct {
	// Endpoint is the proxy's URL; give it to clients instead of the
	// server's.
	Endpoint string

	dropped atomic.Int64
}

// Dropped counts the requests whose If-None-Match the proxy removed, so a
// test can show its client really asked for a conditional write.
func (p *UnsafeProxy) Dropped() int64 { return p.dropped.Load() }

// NewUnsafeProxy starts the proxy on a loopback port in front of s; it is
// closed when the test ends.
func NewUnsafeProxy(t testing.TB, s *Server) *UnsafeProxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &UnsafeProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Keep the Host the client signed, so requests the proxy does
			// not touch still verify.
			pr.Out.Host = pr.In.Host
		},
		Transport: &resigner{p: p, next: http.DefaultTransport, creds: aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.Endpoint = srv.URL
	return p
}

// resigner drops If-None-Match from writes and signs them again.
type resigner struct {
	p     *UnsafeProxy
	next  http.RoundTripper
	creds aws.Credentials
}

func (r *resigner) RoundTrip(req *http.Request) (*http.Response, error) {
	if (req.Method == http.MethodPut || req.Method == http.MethodPost) && req.Header.Get("If-None-Match") != "" {
		req.Header.Del("If-None-Match")
		r.p.dropped.Add(1)
		if err := r.sign(req); err != nil {
			return nil, err
		}
	}
	return r.next.RoundTrip(req)
}

// sign replaces the request's SigV4 signature by one over its current
// headers. The payload hash is the one the client declared.
func (r *resigner) sign(req *http.Request) error {
	hash := req.Header.Get("X-Amz-Content-Sha256")
	if hash == "" {
		hash = "UNSIGNED-PAYLOAD"
	}
	req.Header.Del("Authorization")
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
		SignHTTP(context.Background(), r.creds, req, hash, "s3", Region, time.Now())
}
