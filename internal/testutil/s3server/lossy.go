package s3server

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// LossyProxy is a reverse proxy in front of a real server that, while
// armed, forwards a PUT whose key contains the armed substring and then
// answers 503 instead of the server's answer: the write landed, the client
// cannot know (an unknown outcome).
type LossyProxy struct {
	// Endpoint is the proxy's URL; give it to clients instead of the
	// server's.
	Endpoint string

	match atomic.Pointer[string]
	lost  atomic.Int64
}

// Arm makes the proxy lose the answers to PUTs whose path contains sub
// ("" disarms it).
func (p *LossyProxy) Arm(sub string) { p.match.Store(&sub) }

// Lost counts the answers the proxy replaced.
func (p *LossyProxy) Lost() int64 { return p.lost.Load() }

// NewLossyProxy starts the proxy on a loopback port in front of s (disarmed);
// it is closed when the test ends. Requests pass unchanged, so their
// signatures still verify.
func NewLossyProxy(t testing.TB, s *Server) *LossyProxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &LossyProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.Host = pr.In.Host },
		ModifyResponse: func(r *http.Response) error {
			m := p.match.Load()
			if r.Request.Method == http.MethodPut && m != nil && *m != "" && strings.Contains(r.Request.URL.Path, *m) {
				p.lost.Add(1)
				r.StatusCode, r.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
			}
			return nil
		},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.Endpoint = srv.URL
	return p
}
