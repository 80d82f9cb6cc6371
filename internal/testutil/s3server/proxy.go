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

// Condition is one conditional header an UnsafeProxy can strip, and so one
// guarantee of the store it pretends not to honour.
type Condition int

const (
	// IfNoneMatchOnCreate is If-None-Match on PUT and POST (PutObject,
	// CompleteMultipartUpload): a second create-if-absent of one key
	// overwrites the first instead of failing with 412.
	IfNoneMatchOnCreate Condition = iota
	// IfMatchOnDelete is If-Match on DELETE (DeleteObject): a
	// compare-and-delete with a stale ETag removes whatever the key holds
	// now instead of failing with 412.
	IfMatchOnDelete

	numConditions
)

// header is the header that carries c on a request of method, or "" if
// such a request does not carry it.
func (c Condition) header(method string) string {
	switch {
	case c == IfNoneMatchOnCreate && (method == http.MethodPut || method == http.MethodPost):
		return "If-None-Match"
	case c == IfMatchOnDelete && method == http.MethodDelete:
		return "If-Match"
	}
	return ""
}

// UnsafeProxy is a reverse proxy in front of a real server that behaves
// like an S3-compatible store ignoring some conditional requests
// (lance-format/lance#4205): it drops the headers of the conditions it was
// made with. Because those headers are part of the SigV4 signature, the
// proxy signs a request it changed again with the server's keys;
// everything else passes unchanged.
type UnsafeProxy struct {
	// Endpoint is the proxy's URL; give it to clients instead of the
	// server's.
	Endpoint string

	strip   [numConditions]bool
	dropped [numConditions]atomic.Int64
}

// Dropped counts the requests whose conditional header the proxy removed,
// of every condition it strips, so a test can show its client really
// asked for a conditional request.
func (p *UnsafeProxy) Dropped() int64 {
	var n int64
	for i := range p.dropped {
		n += p.dropped[i].Load()
	}
	return n
}

// DroppedOf counts the requests that lost condition c.
func (p *UnsafeProxy) DroppedOf(c Condition) int64 { return p.dropped[c].Load() }

// NewUnsafeProxy starts the proxy on a loopback port in front of s; it is
// closed when the test ends. It strips the given conditions, and
// IfNoneMatchOnCreate alone when none is given.
func NewUnsafeProxy(t testing.TB, s *Server, strip ...Condition) *UnsafeProxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(strip) == 0 {
		strip = []Condition{IfNoneMatchOnCreate}
	}
	p := &UnsafeProxy{}
	for _, c := range strip {
		if c < 0 || c >= numConditions {
			t.Fatalf("s3server: unknown condition %d", int(c))
		}
		p.strip[c] = true
	}
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

// resigner drops the stripped conditions' headers and signs a changed
// request again.
type resigner struct {
	p     *UnsafeProxy
	next  http.RoundTripper
	creds aws.Credentials
}

func (r *resigner) RoundTrip(req *http.Request) (*http.Response, error) {
	changed := false
	for c := range numConditions {
		if h := c.header(req.Method); r.p.strip[c] && h != "" && req.Header.Get(h) != "" {
			req.Header.Del(h)
			r.p.dropped[c].Add(1)
			changed = true
		}
	}
	if changed {
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
