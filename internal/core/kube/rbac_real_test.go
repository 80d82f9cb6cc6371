package kube_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/walctl/walctl/internal/core/catchup"
)

// The shipped Role is sufficient: every runner operation succeeds with only
// the master's token (the other real tests rely on that too), and nothing
// more is granted: every other verb on every relevant resource, in the
// master's namespace, in another namespace and cluster-wide, is denied.
func TestRealShippedRoleIsSufficientAndMinimal(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "rbac-a1"})
	if err != nil {
		t.Fatalf("Create as the master: %v", err)
	}
	if _, err := e.runner.Get(ctx, ref); err != nil {
		t.Fatalf("Get as the master: %v", err)
	}
	if _, err := e.runner.PodsTerminal(ctx, ref); err != nil {
		t.Fatalf("PodsTerminal as the master: %v", err)
	}
	if err := e.runner.Terminate(ctx, ref); err != nil {
		t.Fatalf("Terminate as the master: %v", err)
	}
	ref2, _ := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "rbac-a2"})

	// Concrete requests the master must not be able to make.
	other := e.ns + "-other"
	if err := apiserver.CreateNamespace(ctx, other); err != nil {
		t.Fatal(err)
	}
	job, _ := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref2.Name, metav1.GetOptions{})
	pod := e.createPod(job, "victim")
	m := e.masterClient()
	foreignJob := job.DeepCopy()
	foreignJob.Namespace, foreignJob.ResourceVersion, foreignJob.UID = other, "", ""
	foreignJob.Spec.Selector, foreignJob.Spec.Template.Labels = nil, nil
	forbidden := map[string]error{
		"delete a Pod": m.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}),
		"create a Job in another namespace": func() error {
			_, err := m.BatchV1().Jobs(other).Create(ctx, foreignJob, createOpts)
			return err
		}(),
		"patch a Job": func() error {
			_, err := m.BatchV1().Jobs(e.ns).Patch(ctx, ref2.Name, types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
			return err
		}(),
		"list Jobs": func() error { _, err := m.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{}); return err }(),
		"create a Pod": func() error {
			_, err := m.CoreV1().Pods(e.ns).Create(ctx, podOf(job, "smuggled"), createOpts)
			return err
		}(),
		"exec into a Pod": m.CoreV1().RESTClient().Post().Namespace(e.ns).Resource("pods").Name(pod.Name).
			SubResource("exec").Param("command", "sh").Param("stdout", "true").Do(ctx).Error(),
		"read a Secret": func() error { _, err := m.CoreV1().Secrets(e.ns).Get(ctx, "x", metav1.GetOptions{}); return err }(),
		"list Pods in another namespace": func() error {
			_, err := m.CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
			return err
		}(),
		"list Namespaces": func() error { _, err := m.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); return err }(),
		"widen its own Role": func() error {
			r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: e.ns}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
			_, err := m.RbacV1().Roles(e.ns).Create(ctx, r, createOpts)
			return err
		}(),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("master could %s: %v (want Forbidden)", what, err)
		}
	}

	// Exhaustive: ask the API server, as the master, about every verb on
	// every resource that matters; only the Role's four rules may be allowed.
	want := map[string]bool{
		e.ns + " batch/jobs create": true, e.ns + " batch/jobs get": true, e.ns + " batch/jobs delete": true,
		e.ns + " /pods list": true,
	}
	resources := []struct{ group, resource, sub string }{
		{"batch", "jobs", ""}, {"batch", "jobs", "status"}, {"batch", "cronjobs", ""},
		{"", "pods", ""}, {"", "pods", "exec"}, {"", "pods", "log"}, {"", "pods", "status"}, {"", "pods", "eviction"},
		{"", "pods", "attach"}, {"", "pods", "portforward"}, {"", "pods", "ephemeralcontainers"},
		{"", "secrets", ""}, {"", "configmaps", ""}, {"", "serviceaccounts", ""}, {"", "serviceaccounts", "token"},
		{"", "events", ""}, {"", "namespaces", ""}, {"", "nodes", ""}, {"", "persistentvolumeclaims", ""},
		{"apps", "deployments", ""}, {"rbac.authorization.k8s.io", "roles", ""}, {"rbac.authorization.k8s.io", "rolebindings", ""},
		{"rbac.authorization.k8s.io", "clusterroles", ""}, {"scheduling.k8s.io", "priorityclasses", ""},
		{"coordination.k8s.io", "leases", ""},
	}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate", "bind", "escalate"}
	var got []string
	for _, ns := range []string{e.ns, other, ""} {
		for _, r := range resources {
			for _, v := range verbs {
				ssar := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: v, Group: r.group, Resource: r.resource, Subresource: r.sub},
				}}
				res, err := m.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, createOpts)
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%s %s/%s %s", ns, r.group, strings.TrimSuffix(r.resource+"/"+r.sub, "/"), v)
				if res.Status.Allowed {
					got = append(got, key)
				}
			}
		}
	}
	sort.Strings(got)
	var wantList []string
	for k := range want {
		wantList = append(wantList, k)
	}
	sort.Strings(wantList)
	if strings.Join(got, "\n") != strings.Join(wantList, "\n") {
		t.Errorf("allowed to the master:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(wantList, "\n"))
	}

	// And the rules the API server reports for the master in its namespace
	// are exactly the Role's on top of what any ServiceAccount there has
	// (self-reviews, public discovery and the like from the bootstrap
	// ClusterRoles), measured with a second, unbound ServiceAccount.
	baseSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "baseline", Namespace: e.ns}}
	if _, err := e.admin.CoreV1().ServiceAccounts(e.ns).Create(ctx, baseSA, createOpts); err != nil {
		t.Fatal(err)
	}
	baseCfg, err := apiserver.ServiceAccountConfig(ctx, e.ns, "baseline")
	if err != nil {
		t.Fatal(err)
	}
	baseline := map[string]bool{}
	for _, r := range rulesOf(t, kubernetes.NewForConfigOrDie(baseCfg), e.ns) {
		baseline[r] = true
	}
	var extra []string
	for _, r := range rulesOf(t, m, e.ns) {
		if !baseline[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(extra)
	wantExtra := []string{
		fmt.Sprintf("%v %v %v %v", []string{batchv1.GroupName}, []string{"jobs"}, []string{"create", "get", "delete"}, []string(nil)),
		fmt.Sprintf("%v %v %v %v", []string{corev1.GroupName}, []string{"pods"}, []string{"list"}, []string(nil)),
	}
	sort.Strings(wantExtra)
	if strings.Join(extra, "\n") != strings.Join(wantExtra, "\n") {
		t.Errorf("rules beyond any ServiceAccount's:\n%s\nwant exactly the Role's:\n%s", strings.Join(extra, "\n"), strings.Join(wantExtra, "\n"))
	}
}

// rulesOf is what the API server says the client's identity may do in ns.
func rulesOf(t *testing.T, c kubernetes.Interface, ns string) []string {
	t.Helper()
	rr, err := c.AuthorizationV1().SelfSubjectRulesReviews().Create(testCtx(t),
		&authzv1.SelfSubjectRulesReview{Spec: authzv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, createOpts)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status.Incomplete {
		t.Fatalf("rules review incomplete: %s", rr.Status.EvaluationError)
	}
	var out []string
	for _, r := range rr.Status.ResourceRules {
		var names []string
		if len(r.ResourceNames) > 0 {
			names = r.ResourceNames
		}
		out = append(out, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.Resources, r.Verbs, names))
	}
	return out
}
