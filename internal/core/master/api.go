// Package master is `walctl master run` (issue 7): Run, the daemon's
// lifecycle (catch-up master, controller, API server, endpoint file,
// shutdown grace); the catch-up API in front of catchup.Master and
// catchup.Controller, with bearer-token authentication, strict request
// decoding, /healthz and /metrics; and Client, the API's one client (the
// catch-up verbs and the tests use it).
//
// Routes (JSON in and out; every error is {"error", "code", "status"}):
//
//	GET  /healthz                           200 "ok" (no token)
//	GET  /metrics                           Prometheus (no token)
//	POST /api/v1/catchup                    {target, reason, dry_run} → catchup.Admission
//	GET  /api/v1/catchup?target=T           catchup.Status
//	POST /api/v1/catchup/cancel             {target, reason} → catchup.Status
//
// Statuses: 200 for every admission decision (a refusal is an answer, not
// an error); 400 for a malformed body, unknown fields, a field that tries
// to supply a Pod spec, image, command or force flag, or a bad table name;
// 401 without the right bearer token; 404 for a table the WAL does not
// know (or, for cancel, no active catch-up); 405 for a wrong method; 409
// when a cancellation loses to concurrent progress; 413 for a body over
// the limit; 500 for records this binary does not know; 503 when etcd or
// the WAL is unavailable. A refused request writes nothing.
//
// Several masters: one leads (etcd election); a follower answers POSTs
// (admission, cancel) with 503, code "not_leader", the leader's URL in
// "leader" and the X-Walctl-Leader header (Client follows it once), and
// serves GET status itself from etcd. A leader whose term ended under a
// request answers 503 too (code "unavailable"): etcd refused its write.
package master

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// DefaultMaxBody bounds a request body.
const DefaultMaxBody = 16 << 10

// Catchup is what the API calls: *catchup.Master for Admit and Cancel,
// the controller (or the Store) for Status.
type Catchup interface {
	Admit(ctx context.Context, req catchup.Request) (catchup.Admission, error)
	Cancel(ctx context.Context, table, reason, by string) error
	Status(ctx context.Context, table string) (catchup.Status, error)
}

// NewCatchup joins a Master (admission) and its Controller (cancellation
// that looks at the Job first, status with the controller's stall
// observation) into a Catchup.
func NewCatchup(m *catchup.Master, c *catchup.Controller) Catchup { return joined{m, c} }

type joined struct {
	*catchup.Master
	c *catchup.Controller
}

func (j joined) Status(ctx context.Context, table string) (catchup.Status, error) {
	return j.c.Status(ctx, table)
}

// Cancel looks at the Job before the cancellation CAS (Controller.Cancel):
// a Job that already finished keeps its outcome.
func (j joined) Cancel(ctx context.Context, table, reason, by string) error {
	return j.c.Cancel(ctx, table, reason, by)
}

// Tables tells whether a table exists (wal.Log satisfies it).
type Tables interface {
	Table(ctx context.Context, name string) (wal.TableInfo, error)
}

// Config configures the API handler.
type Config struct {
	// Token is the bearer token every /api/ request must carry (required).
	Token    string
	Catchup  Catchup
	Tables   Tables
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// MaxBody bounds request bodies (DefaultMaxBody if <= 0).
	MaxBody int64
}

// Server is the API's http.Handler.
type Server struct {
	cfg       Config
	token     [sha256.Size]byte
	mux       *http.ServeMux
	requests  *prometheus.CounterVec
	decisions *prometheus.CounterVec
}

// New returns the API handler. An empty token is errs.ErrInvalid: the
// API never runs unauthenticated.
func New(cfg Config) (*Server, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, fmt.Errorf("master API: no bearer token configured (master.token, WALCTL_MASTER_TOKEN): %w", errs.ErrInvalid)
	}
	if cfg.Catchup == nil || cfg.Tables == nil {
		return nil, fmt.Errorf("master API: catch-up and tables are required: %w", errs.ErrInvalid)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registry
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, cfg.Gatherer = r, r
	}
	s := &Server{cfg: cfg, token: sha256.Sum256([]byte(cfg.Token)), mux: http.NewServeMux(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walctl_master_api_requests_total",
			Help: "Master API requests by route and HTTP status."}, []string{"route", "code"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walctl_catchup_api_admissions_total",
			Help: "Catch-up admission decisions answered by the API."}, []string{"decision", "dry_run"}),
	}
	reg.MustRegister(s.requests, s.decisions)
	s.mux.HandleFunc("/healthz", s.healthz)
	if cfg.Gatherer != nil {
		s.mux.Handle("/metrics", metricsHandler(cfg.Gatherer))
	}
	s.mux.HandleFunc("/api/v1/catchup", s.authed("catchup", s.catchup))
	s.mux.HandleFunc("/api/v1/catchup/cancel", s.authed("cancel", s.cancel))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, "other", http.StatusNotFound, "not_found", "no such route: "+r.URL.Path)
	})
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// authed checks the bearer token in constant time before h runs.
func (s *Server) authed(route string, h func(string, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="walctl-master"`)
			s.fail(w, route, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		h(route, w, r)
	}
}

// statusOf maps an error of the catch-up core onto an HTTP status and code.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, errs.ErrInvalid):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, errs.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errs.ErrConflict), errors.Is(err, errs.ErrFenced):
		return http.StatusConflict, "conflict"
	case errors.Is(err, errs.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, coord.ErrUnknownRecord), errors.Is(err, errs.ErrCorrupt):
		return http.StatusInternalServerError, "unknown_record"
	}
	return http.StatusInternalServerError, "internal"
}

func (s *Server) failErr(w http.ResponseWriter, route string, err error) {
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		if nl.Leader.URL != "" {
			w.Header().Set("X-Walctl-Leader", nl.Leader.URL)
		}
		s.reply(w, route, http.StatusServiceUnavailable, ErrorBody{Error: err.Error(), Code: "not_leader",
			Status: http.StatusServiceUnavailable, Leader: nl.Leader.URL})
		return
	}
	status, code := statusOf(err)
	if status >= 500 {
		s.cfg.Logger.Warn("master API request failed", "route", route, "err", err)
	}
	s.fail(w, route, status, code, err.Error())
}

// checkTarget validates the name and requires a table the WAL knows.
func (s *Server) checkTarget(ctx context.Context, table string) error {
	if table == "" {
		return fmt.Errorf("target is required: %w", errs.ErrInvalid)
	}
	if err := coord.ValidateTable(table); err != nil {
		return err
	}
	if _, err := s.cfg.Tables.Table(ctx, table); err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return fmt.Errorf("unknown target %q: no such table in the WAL: %w", table, errs.ErrNotFound)
		}
		return err
	}
	return nil
}
