package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// EndpointFile is where a master serving dataDir publishes its API URL
// (written atomically by Run, removed when it stops); clients read it when
// no URL is configured.
func EndpointFile(dataDir string) string { return filepath.Join(dataDir, "master", "ENDPOINT") }

// ReadEndpoint returns the URL the master serving dataDir published, or an
// error wrapping errs.ErrUnavailable when none runs there.
func ReadEndpoint(dataDir string) (string, error) {
	b, err := os.ReadFile(EndpointFile(dataDir))
	if err != nil {
		return "", fmt.Errorf("no master: give --master URL (or master.url), or run 'walctl master run' on data dir %s: %w",
			dataDir, errs.ErrUnavailable)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeEndpoint publishes url at path atomically: a reader sees the old
// file or the whole new one, never a torn URL.
func writeEndpoint(path, url string) error {
	if err := durable.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("publish master endpoint: %w", err)
	}
	if err := durable.WriteAtomic(path, []byte(url+"\n")); err != nil {
		return fmt.Errorf("publish master endpoint: %w", err)
	}
	return nil
}

// Client talks to the master's catch-up API. It is what `walctl catchup
// submit|status|cancel` and the tests use; every call is bounded by the
// client's timeout and ctx.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client of the API at base (http(s)://host:port),
// sending token as its bearer token. A malformed URL is errs.ErrInvalid.
func NewClient(base, token string, timeout time.Duration) (*Client, error) {
	base = strings.TrimRight(base, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("master URL %q: want http(s)://host:port: %w", base, errs.ErrInvalid)
	}
	return &Client{base: base, token: token, http: &http.Client{Timeout: timeout}}, nil
}

// Submit asks for a table's catch-up (POST /api/v1/catchup). Every
// decision is an answer; errors are refusals (*APIError) or an unreachable
// master (errs.ErrUnavailable).
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (catchup.Admission, error) {
	var a catchup.Admission
	return a, c.do(ctx, http.MethodPost, "/api/v1/catchup", req, &a)
}

// Status reads a table's catch-up (GET /api/v1/catchup?target=T).
func (c *Client) Status(ctx context.Context, table string) (catchup.Status, error) {
	var st catchup.Status
	return st, c.do(ctx, http.MethodGet, "/api/v1/catchup?target="+url.QueryEscape(table), nil, &st)
}

// Cancel cancels a table's catch-up (POST /api/v1/catchup/cancel) and
// returns its status afterwards.
func (c *Client) Cancel(ctx context.Context, req CancelRequest) (catchup.Status, error) {
	var st catchup.Status
	return st, c.do(ctx, http.MethodPost, "/api/v1/catchup/cancel", req, &st)
}

// do sends one request and decodes a 200 answer into out; any other status
// becomes an *APIError of the matching category carrying the API's message.
// A follower's 503 naming the leader is followed once, to the leader.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	err := c.doAt(ctx, c.base, method, path, body, out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Leader != "" && ae.Leader != c.base {
		return c.doAt(ctx, ae.Leader, method, path, body, out)
	}
	return err
}

func (c *Client) doAt(ctx context.Context, base, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return fmt.Errorf("master request: %v: %w", err, errs.ErrInvalid)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("master %s: %v: %w", base, err, errs.ErrUnavailable)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("master %s: read answer: %v: %w", base, err, errs.ErrUnavailable)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("master %s: unparsable answer: %v: %w", base, err, errs.ErrUnavailable)
		}
		return nil
	}
	e := &APIError{URL: base, Status: resp.StatusCode, Message: strings.TrimSpace(string(data))}
	var eb ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		e.Code, e.Message, e.Leader = eb.Code, eb.Error, strings.TrimRight(eb.Leader, "/")
	}
	return e
}

// APIError is a refusal by the master's API: its message names the cause,
// its category (Unwrap) decides the exit code.
type APIError struct {
	URL     string
	Status  int
	Code    string
	Message string
	// Leader is the leader's URL a follower named (503 not_leader).
	Leader string
}

// Error names the master, the HTTP status and the API's message; a 401
// says where the token comes from.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("master %s: HTTP %d: %s", e.URL, e.Status, e.Message)
	if e.Status == http.StatusUnauthorized {
		msg += " (the token comes from WALCTL_MASTER_TOKEN or master.token in the config file, and must be the master's)"
	}
	return msg
}

// Unwrap maps the HTTP status onto walctl's error categories: 400, 401,
// 403, 405 and 413 are errs.ErrInvalid, 404 errs.ErrNotFound, 409
// errs.ErrConflict, 500 errs.ErrCorrupt, anything else errs.ErrUnavailable.
func (e *APIError) Unwrap() error {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed:
		return errs.ErrInvalid
	case http.StatusNotFound:
		return errs.ErrNotFound
	case http.StatusConflict:
		return errs.ErrConflict
	case http.StatusInternalServerError:
		return errs.ErrCorrupt
	}
	return errs.ErrUnavailable
}
