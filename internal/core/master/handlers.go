package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walctl/walctl/internal/core/catchup"
)

// ErrorBody is the JSON of every refused request.
type ErrorBody struct {
	Error  string `json:"error"`
	Code   string `json:"code"`
	Status int    `json:"status"`
	// Leader is the catch-up leader's URL, on a follower's 503 not_leader
	// (omitted otherwise, and while no leader is elected).
	Leader string `json:"leader,omitempty"`
}

// SubmitRequest is the body of POST /api/v1/catchup.
type SubmitRequest struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
	DryRun bool   `json:"dry_run"`
}

// CancelRequest is the body of POST /api/v1/catchup/cancel.
type CancelRequest struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
}

// forbidden are fields callers use to smuggle execution details in (rule
// 16): compared lowercased without '_' and '-'; any "force…" field too.
var forbidden = map[string]bool{
	"pod": true, "podspec": true, "pods": true, "spec": true, "template": true, "jobtemplate": true,
	"image": true, "images": true, "command": true, "commands": true, "args": true, "entrypoint": true,
	"containers": true, "container": true, "env": true, "resources": true, "serviceaccount": true,
	"serviceaccountname": true,
}

func forbiddenField(name string) bool {
	n := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
	return forbidden[n] || strings.HasPrefix(n, "force")
}

// decode reads a size-limited, single JSON object strictly into v:
// forbidden fields are named first, then unknown fields are refused.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) (int, string, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("request body exceeds %d bytes", tooBig.Limit)
	}
	if err != nil {
		return http.StatusBadRequest, "invalid", fmt.Errorf("read request body: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return http.StatusBadRequest, "invalid", fmt.Errorf("request body is not a single JSON object: %v", err)
	}
	var bad []string
	for k := range fields {
		if forbiddenField(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return http.StatusBadRequest, "forbidden_field", fmt.Errorf("field(s) %s refused: Pod specs, images, commands and force "+
			"flags come from the master's reviewed Job template and policy, never from API callers", strings.Join(bad, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, "invalid", fmt.Errorf("request body: %v", err)
	}
	return 0, "", nil
}

// catchup serves POST (admission) and GET (status) of /api/v1/catchup.
func (s *Server) catchup(route string, w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		table := r.URL.Query().Get("target")
		if err := s.checkTarget(r.Context(), table); err != nil {
			s.failErr(w, route, err)
			return
		}
		st, err := s.cfg.Catchup.Status(r.Context(), table)
		if err != nil {
			s.failErr(w, route, err)
			return
		}
		s.reply(w, route, http.StatusOK, st)
	case http.MethodPost:
		var req SubmitRequest
		if status, code, err := s.decode(w, r, &req); err != nil {
			s.fail(w, route, status, code, err.Error())
			return
		}
		if err := s.checkTarget(r.Context(), req.Target); err != nil {
			s.failErr(w, route, err)
			return
		}
		a, err := s.cfg.Catchup.Admit(r.Context(), catchup.Request{Target: req.Target, Reason: req.Reason,
			DryRun: req.DryRun, Source: "api"})
		if err != nil {
			s.failErr(w, route, err)
			return
		}
		s.decisions.WithLabelValues(string(a.Decision), strconv.FormatBool(a.DryRun)).Inc()
		s.cfg.Logger.Info("catch-up request answered", "target", a.Target, "decision", a.Decision,
			"dry_run", a.DryRun, "reason", req.Reason, "remote", r.RemoteAddr)
		s.reply(w, route, http.StatusOK, a)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.fail(w, route, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here")
	}
}

// cancel serves POST /api/v1/catchup/cancel: Master.Cancel's CAS, then the
// table's status.
func (s *Server) cancel(route string, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.fail(w, route, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here")
		return
	}
	var req CancelRequest
	if status, code, err := s.decode(w, r, &req); err != nil {
		s.fail(w, route, status, code, err.Error())
		return
	}
	if err := s.checkTarget(r.Context(), req.Target); err != nil {
		s.failErr(w, route, err)
		return
	}
	if err := s.cfg.Catchup.Cancel(r.Context(), req.Target, req.Reason, "api "+r.RemoteAddr); err != nil {
		s.failErr(w, route, err)
		return
	}
	st, err := s.cfg.Catchup.Status(r.Context(), req.Target)
	if err != nil {
		s.failErr(w, route, err)
		return
	}
	s.reply(w, route, http.StatusOK, st)
}

func (s *Server) reply(w http.ResponseWriter, route string, status int, v any) {
	s.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, route string, status int, code, msg string) {
	s.reply(w, route, status, ErrorBody{Error: msg, Code: code, Status: status})
}

func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
