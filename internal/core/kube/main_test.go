package kube_test

// The *_real_test.go files prove the Job safety rules (DESIGN.md §3 rule 16)
// against a real kube-apiserver with RBAC on. The runner always acts as the
// shipped ServiceAccount (deploy/rbac.yaml) with a minted token; only test
// set-up and fault injection use the admin identity.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/walctl/walctl/internal/core/kube"
	"github.com/walctl/walctl/internal/core/kube/kubetest"
)

var apiserver *kubetest.Server

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &apiserver)) }

// env is one test's namespace, set up as a master would find it.
type env struct {
	t      *testing.T
	ns     string
	admin  kubernetes.Interface
	master *rest.Config // the shipped ServiceAccount's token, nothing else
	faults *faultRT     // between the runner and the API server
	runner *kube.Runner
}

var nsSeq atomic.Int64

func newEnv(t *testing.T, mutate ...func(*kube.Config)) *env {
	t.Helper()
	ctx := testCtx(t)
	ns := fmt.Sprintf("t%d-%s", nsSeq.Add(1), strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-"))
	if len(ns) > 60 {
		ns = strings.TrimRight(ns[:60], "-")
	}
	master, err := apiserver.MasterConfig(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ns: ns, admin: apiserver.AdminClient(), master: master, faults: &faultRT{}}
	e.runner = e.newRunner(mutate...)
	t.Cleanup(func() {
		if calls := e.faults.unbounded(); len(calls) > 0 {
			t.Errorf("API calls without a deadline: %v", calls)
		}
	})
	return e
}

// newRunner builds a Runner acting as the shipped ServiceAccount, through
// the fault-injecting transport.
func (e *env) newRunner(mutate ...func(*kube.Config)) *kube.Runner {
	e.t.Helper()
	tpl, err := kube.LoadTemplate("../../../deploy/catchup-job-template.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := kube.Config{
		Namespace: e.ns,
		Template:  tpl,
		CPU:       resource.MustParse("1500m"),
		Memory:    resource.MustParse("2Gi"),
		Env:       map[string]string{"WALCTL_ETCD_ENDPOINTS": "http://etcd:2379", "WALCTL_WAL": "wal:7070"},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	rc := rest.CopyConfig(e.master)
	rc.Timeout = 0 // client-go would otherwise put its own deadline on every request
	rc.Wrap(func(next http.RoundTripper) http.RoundTripper { e.faults.setNext(next); return e.faults })
	r, err := kube.NewRunnerForConfig(rc, cfg, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// masterClient is a plain clientset with the master's token (no faults).
func (e *env) masterClient() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(e.master)
}

// jobs lists the namespace's walctl Jobs with the admin identity.
func (e *env) jobs() []string {
	e.t.Helper()
	list, err := e.admin.BatchV1().Jobs(e.ns).List(testCtx(e.t), metav1.ListOptions{LabelSelector: kube.LabelManagedBy + "=" + kube.ManagedByWalctl})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		out = append(out, j.Name+"/"+string(j.UID))
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fault says what faultRT does with one request.
type fault int

const (
	pass         fault = iota
	dropRequest        // fail before the request reaches the server
	loseResponse       // forward, then report a connection reset
	gateway504         // forward, then answer 504 as a proxy would
)

// faultRT injects faults into the runner's requests and records requests
// made without a deadline. rule picks the fault per request.
type faultRT struct {
	mu      sync.Mutex
	next    http.RoundTripper
	rule    func(*http.Request) fault
	noDL    []string
	applied []string
}

func (f *faultRT) setNext(next http.RoundTripper) { f.mu.Lock(); f.next = next; f.mu.Unlock() }

func (f *faultRT) set(rule func(*http.Request) fault) {
	f.mu.Lock()
	f.rule = rule
	f.mu.Unlock()
}

// once applies fl to the first request matching method and a path suffix.
func (f *faultRT) once(method, suffix string, fl fault) {
	var done atomic.Bool
	f.set(func(r *http.Request) fault {
		if r.Method == method && strings.HasSuffix(r.URL.Path, suffix) && done.CompareAndSwap(false, true) {
			return fl
		}
		return pass
	})
}

func (f *faultRT) unbounded() []string { f.mu.Lock(); defer f.mu.Unlock(); return f.noDL }

func (f *faultRT) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.applied...)
}

func (f *faultRT) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	next, rule := f.next, f.rule
	if _, ok := r.Context().Deadline(); !ok {
		f.noDL = append(f.noDL, r.Method+" "+r.URL.Path)
	}
	fl := pass
	if rule != nil {
		fl = rule(r)
	}
	if fl != pass {
		f.applied = append(f.applied, fmt.Sprintf("%s %s: %d", r.Method, r.URL.Path, fl))
	}
	f.mu.Unlock()
	if fl == dropRequest {
		return nil, fmt.Errorf("dial tcp %s: connect: connection refused (injected)", r.URL.Host)
	}
	resp, err := next.RoundTrip(r)
	if err != nil || fl == pass {
		return resp, err
	}
	resp.Body.Close()
	if fl == loseResponse {
		return nil, fmt.Errorf("read tcp %s: read: connection reset by peer (injected after the server answered %d)", r.URL.Host, resp.StatusCode)
	}
	body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"gateway timeout (injected)","reason":"Timeout","code":504}`
	return &http.Response{
		StatusCode: http.StatusGatewayTimeout, Status: "504 Gateway Timeout", Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r,
	}, nil
}
