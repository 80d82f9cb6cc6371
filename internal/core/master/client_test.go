package master

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

func newClient(t *testing.T, token string) (*Client, *fakeCatchup) {
	t.Helper()
	s, fc := newServer(t)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c, err := NewClient(hs.URL+"/", token, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c, fc
}

// The client and the server agree on every route, and refusals come back
// as errors of the category their status stands for.
func TestClientTalksToTheAPI(t *testing.T) {
	ctx := context.Background()
	c, fc := newClient(t, "tok")
	a, err := c.Submit(ctx, SubmitRequest{Target: "orders", Reason: "r", DryRun: true})
	if err != nil || a.Decision != catchup.DecisionEligible || !a.DryRun || len(fc.admits) != 1 || fc.admits[0].Reason != "r" {
		t.Fatalf("submit: %+v, %v (admits %+v)", a, err, fc.admits)
	}
	if st, err := c.Status(ctx, "orders"); err != nil || st.Target != "orders" {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if _, err := c.Status(ctx, "nope"); !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "HTTP 404: unknown target") {
		t.Fatalf("status of an unknown table: %v, want errs.ErrNotFound", err)
	}
	fc.cancelErr = catchup.ErrAlreadyFinished
	if _, err := c.Cancel(ctx, CancelRequest{Target: "orders"}); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "cannot be cancelled") {
		t.Fatalf("cancel of a finished job: %v, want errs.ErrConflict", err)
	}
	var apiErr *APIError
	if _, err := c.Cancel(ctx, CancelRequest{Target: "orders"}); !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != "conflict" {
		t.Fatalf("APIError %+v from %v", apiErr, err)
	}
}

// Friction (issue 13): a 401 says where the token comes from.
func TestClientUnauthorizedHintsAtTheToken(t *testing.T) {
	c, fc := newClient(t, "wrong")
	_, err := c.Submit(context.Background(), SubmitRequest{Target: "orders"})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "WALCTL_MASTER_TOKEN") {
		t.Fatalf("401: %v; want errs.ErrInvalid naming WALCTL_MASTER_TOKEN", err)
	}
	if len(fc.admits) != 0 {
		t.Fatal("an unauthorized request reached the core")
	}
}

func TestClientRefusesBadURLsAndReportsAnAbsentMaster(t *testing.T) {
	for _, u := range []string{"ftp://x", "localhost:7460", "http://", ":"} {
		if _, err := NewClient(u, "t", time.Second); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("NewClient(%q): %v, want errs.ErrInvalid", u, err)
		}
	}
	c, err := NewClient("http://127.0.0.1:1", "t", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background(), "orders"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("no master listening: %v, want errs.ErrUnavailable", err)
	}
}

func TestEndpointFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadEndpoint(dir); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("no endpoint file: %v, want errs.ErrUnavailable", err)
	}
	if err := writeEndpoint(EndpointFile(dir), "http://127.0.0.1:7460"); err != nil {
		t.Fatal(err)
	}
	if u, err := ReadEndpoint(dir); err != nil || u != "http://127.0.0.1:7460" {
		t.Fatalf("ReadEndpoint = %q, %v", u, err)
	}
	if err := writeEndpoint(EndpointFile(dir), "http://127.0.0.1:7461"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(EndpointFile(dir)))
	if u, _ := ReadEndpoint(dir); u != "http://127.0.0.1:7461" || len(entries) != 1 {
		t.Fatalf("rewritten endpoint %q, dir holds %d entries (a temporary file left?)", u, len(entries))
	}
}
