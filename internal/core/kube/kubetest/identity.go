package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Shipped identity (deploy/rbac.yaml): the master's ServiceAccount and Role.
const (
	MasterServiceAccount = "walctl-master"
	MasterRole           = "walctl-master-catchup"
	shippedNamespace     = "walctl"
)

// CreateNamespace creates namespace ns and its "default" ServiceAccount
// (which the ServiceAccount admission plugin requires of every Pod and which
// no controller-manager creates here). On cancellation or failure the
// namespace may exist without its ServiceAccount; use a fresh name to retry.
func (s *Server) CreateNamespace(ctx context.Context, ns string) error {
	c := s.AdminClient()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create default service account in %s: %w", ns, err)
	}
	return nil
}

// DeployFile is the path of a file under the module's deploy/ directory.
func DeployFile(name string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", name), nil
}

// ApplyShippedRBAC creates the ServiceAccount, Role and RoleBinding of
// deploy/rbac.yaml in namespace ns (rewriting the shipped namespace, also in
// the RoleBinding's subjects) with the admin identity, unchanged otherwise.
// Any other kind in the file is an error: the shipped RBAC is namespaced only.
// On cancellation or failure some of the objects may exist.
func (s *Server) ApplyShippedRBAC(ctx context.Context, ns string) error {
	path, err := DeployFile("rbac.yaml")
	if err != nil {
		return err
	}
	objs, err := DecodeManifests(path)
	if err != nil {
		return err
	}
	c := s.AdminClient()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace = rewriteNS(o.Namespace, ns)
			_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			o.Namespace = rewriteNS(o.Namespace, ns)
			_, err = c.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Namespace = rewriteNS(o.Namespace, ns)
			for i := range o.Subjects {
				o.Subjects[i].Namespace = rewriteNS(o.Subjects[i].Namespace, ns)
			}
			_, err = c.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: unexpected object %T: the shipped RBAC must be namespaced ServiceAccount/Role/RoleBinding only", path, obj)
		}
		if err != nil {
			return fmt.Errorf("apply %s: %w", path, err)
		}
	}
	return nil
}

func rewriteNS(got, ns string) string {
	if got == "" || got == shippedNamespace {
		return ns
	}
	return got // left as written: the apiserver then refuses a mismatch
}

// DecodeManifests strictly decodes every document of a multi-document YAML
// file into typed objects (unknown fields are errors).
func DecodeManifests(path string) ([]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := codec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, obj)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

// ServiceAccountConfig mints a token for ServiceAccount ns/name with the
// TokenRequest API and returns a rest.Config that acts as that account and
// nothing else (no admin credentials). The token is valid for an hour;
// cancellation before the answer leaves nothing behind but an unused token.
func (s *Server) ServiceAccountConfig(ctx context.Context, ns, name string) (*rest.Config, error) {
	ttl := int64(time.Hour / time.Second)
	tr, err := s.AdminClient().CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s: %w", ns, name, err)
	}
	cfg := s.Admin()
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// MasterConfig prepares namespace ns as a master would find it — the
// namespace, its default ServiceAccount, the shipped RBAC — and returns a
// rest.Config authenticated as the shipped ServiceAccount, which holds only
// the shipped Role (plus what every authenticated identity holds, such as
// discovery). It returns only once the RBAC authorizer applies the binding.
// On cancellation or failure the namespace may be partly prepared.
func (s *Server) MasterConfig(ctx context.Context, ns string) (*rest.Config, error) {
	if err := s.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	if err := s.ApplyShippedRBAC(ctx, ns); err != nil {
		return nil, err
	}
	cfg, err := s.ServiceAccountConfig(ctx, ns, MasterServiceAccount)
	if err != nil {
		return nil, err
	}
	return cfg, WaitAllowed(ctx, cfg, authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "batch", Resource: "jobs"})
}

// WaitAllowed waits until the identity of cfg may do what attrs describe.
// The RBAC authorizer reads Roles and RoleBindings from an informer cache,
// so a binding takes effect a few milliseconds after it is created; acting
// before that would fail with Forbidden.
func WaitAllowed(ctx context.Context, cfg *rest.Config, attrs authzv1.ResourceAttributes) error {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err == nil && r.Status.Allowed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for RBAC to allow %+v: %w (last: %v)", attrs, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Main starts a Server for a test package, stores it in *srv, runs the tests
// and stops the server. A server that cannot start (for example because
// `make kube-apiserver` was not run) fails the package with exit code 1.
func Main(m *testing.M, srv **Server) int {
	dir, err := os.MkdirTemp("", "walctl-kubetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	s, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: kubetest: cannot start a real kube-apiserver:", err)
		return 1
	}
	defer s.Close()
	flag.Parse()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "kubetest: kube-apiserver ready at %s in %s\n", s.URL, time.Since(start).Round(time.Millisecond))
	}
	*srv = s
	return m.Run()
}
