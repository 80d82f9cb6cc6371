package master

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// fakeCatchup records what reached the core; it never fails unless told.
type fakeCatchup struct {
	admits    []catchup.Request
	cancels   []string
	cancelErr error
}

func (f *fakeCatchup) Admit(_ context.Context, req catchup.Request) (catchup.Admission, error) {
	f.admits = append(f.admits, req)
	d := catchup.DecisionReserved
	if req.DryRun {
		d = catchup.DecisionEligible
	}
	return catchup.Admission{Target: req.Target, Decision: d, DryRun: req.DryRun}, nil
}

func (f *fakeCatchup) Cancel(_ context.Context, table, _, _ string) error {
	f.cancels = append(f.cancels, table)
	return f.cancelErr
}

func (f *fakeCatchup) Status(_ context.Context, table string) (catchup.Status, error) {
	return catchup.Status{Target: table, Phase: catchup.PhaseIdle}, nil
}

type fakeTables map[string]bool

func (f fakeTables) Table(_ context.Context, name string) (wal.TableInfo, error) {
	if !f[name] {
		return wal.TableInfo{}, fmt.Errorf("table %s: %w", name, wal.ErrUnknownTable)
	}
	return wal.TableInfo{Name: name}, nil
}

func newServer(t *testing.T) (*Server, *fakeCatchup) {
	t.Helper()
	fc := &fakeCatchup{}
	s, err := New(Config{Token: "tok", Catchup: fc, Tables: fakeTables{"orders": true}})
	if err != nil {
		t.Fatal(err)
	}
	return s, fc
}

func do(s *Server, method, path, token, body string) (*httptest.ResponseRecorder, ErrorBody) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var eb ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &eb)
	return rec, eb
}

func TestRefusedRequestsReachNothing(t *testing.T) {
	big := `{"target": "orders", "reason": "` + strings.Repeat("x", DefaultMaxBody) + `"}`
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		code, msg                       string
	}{
		{"no token", "POST", "/api/v1/catchup", "", `{"target": "orders"}`, 401, "unauthorized", "bearer token"},
		{"wrong token", "POST", "/api/v1/catchup", "tok2", `{"target": "orders"}`, 401, "unauthorized", ""},
		{"token prefix", "POST", "/api/v1/catchup", "to", `{"target": "orders"}`, 401, "unauthorized", ""},
		{"status wrong token", "GET", "/api/v1/catchup?target=orders", "x", "", 401, "unauthorized", ""},
		{"pod spec", "POST", "/api/v1/catchup", "tok", `{"target": "orders", "podSpec": {}}`, 400, "forbidden_field", "podSpec"},
		{"image", "POST", "/api/v1/catchup", "tok", `{"target": "orders", "Image": "x"}`, 400, "forbidden_field", "Image"},
		{"command", "POST", "/api/v1/catchup", "tok", `{"target": "orders", "command": ["sh"]}`, 400, "forbidden_field", "command"},
		{"force", "POST", "/api/v1/catchup", "tok", `{"target": "orders", "force_admit": true}`, 400, "forbidden_field", "force_admit"},
		{"unknown field", "POST", "/api/v1/catchup", "tok", `{"target": "orders", "slot": 3}`, 400, "invalid", "unknown field"},
		{"trailing data", "POST", "/api/v1/catchup", "tok", `{"target": "orders"} {}`, 400, "invalid", "single JSON object"},
		{"not an object", "POST", "/api/v1/catchup", "tok", `["orders"]`, 400, "invalid", "single JSON object"},
		{"path separator", "POST", "/api/v1/catchup", "tok", `{"target": "a/b"}`, 400, "invalid", "table name"},
		{"dot dot", "POST", "/api/v1/catchup", "tok", `{"target": "../x"}`, 400, "invalid", "table name"},
		{"no target", "POST", "/api/v1/catchup", "tok", `{"reason": "x"}`, 400, "invalid", "target is required"},
		{"unknown target", "POST", "/api/v1/catchup", "tok", `{"target": "nope"}`, 404, "not_found", "unknown target"},
		{"oversized", "POST", "/api/v1/catchup", "tok", big, 413, "too_large", "exceeds"},
		{"status bad name", "GET", "/api/v1/catchup?target=..%2Fx", "tok", "", 400, "invalid", ""},
		{"cancel forbidden", "POST", "/api/v1/catchup/cancel", "tok", `{"target": "orders", "force": true}`, 400, "forbidden_field", ""},
		{"cancel GET", "GET", "/api/v1/catchup/cancel", "tok", "", 405, "method_not_allowed", ""},
		{"PUT", "PUT", "/api/v1/catchup", "tok", `{}`, 405, "method_not_allowed", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, fc := newServer(t)
			rec, eb := do(s, c.method, c.path, c.token, c.body)
			if rec.Code != c.status || eb.Code != c.code || eb.Status != c.status || !strings.Contains(eb.Error, c.msg) {
				t.Fatalf("HTTP %d %+v, want %d %s containing %q", rec.Code, eb, c.status, c.code, c.msg)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			if len(fc.admits) != 0 || len(fc.cancels) != 0 {
				t.Fatalf("a refused request reached the core: %v %v", fc.admits, fc.cancels)
			}
		})
	}
}

func TestAdmitAndStatusAndCancel(t *testing.T) {
	s, fc := newServer(t)
	rec, _ := do(s, "POST", "/api/v1/catchup", "tok", `{"target": "orders", "reason": "r", "dry_run": true}`)
	var a catchup.Admission
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || rec.Code != 200 || a.Decision != catchup.DecisionEligible {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
	}
	if len(fc.admits) != 1 || fc.admits[0].Source != "api" || fc.admits[0].Reason != "r" || !fc.admits[0].DryRun {
		t.Fatalf("admits %+v", fc.admits)
	}
	rec, _ = do(s, "GET", "/api/v1/catchup?target=orders", "tok", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"job_id": null`) {
		t.Fatalf("status: HTTP %d %s", rec.Code, rec.Body)
	}
	fc.cancelErr = catchup.ErrProgressAdvanced
	if rec, eb := do(s, "POST", "/api/v1/catchup/cancel", "tok", `{"target": "orders"}`); rec.Code != 409 || eb.Code != "conflict" {
		t.Fatalf("cancel losing its CAS: HTTP %d %+v", rec.Code, eb)
	}
	fc.cancelErr = catchup.ErrNotActive
	if rec, _ := do(s, "POST", "/api/v1/catchup/cancel", "tok", `{"target": "orders"}`); rec.Code != 404 {
		t.Fatalf("cancel of nothing: HTTP %d", rec.Code)
	}
	fc.cancelErr = fmt.Errorf("etcd: %w", errs.ErrUnavailable)
	if rec, _ := do(s, "POST", "/api/v1/catchup/cancel", "tok", `{"target": "orders"}`); rec.Code != 503 {
		t.Fatalf("cancel during an outage: HTTP %d", rec.Code)
	}
	if rec, _ := do(s, "GET", "/healthz", "", ""); rec.Code != 200 {
		t.Fatalf("healthz: %d", rec.Code)
	}
	if rec, _ := do(s, "GET", "/metrics", "", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), "walctl_catchup_api_admissions_total") {
		t.Fatalf("metrics: %d %s", rec.Code, rec.Body)
	}
}

func TestNewRequiresToken(t *testing.T) {
	if _, err := New(Config{Token: " ", Catchup: &fakeCatchup{}, Tables: fakeTables{}}); err == nil {
		t.Fatal("an API without a token was built")
	}
}

var _ http.Handler = (*Server)(nil)
