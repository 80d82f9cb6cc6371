package kube_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/kube"
	"github.com/walctl/walctl/internal/core/kube/kubetest"
)

// bundleNamespace is the namespace deploy/kustomization.yaml renders into.
const bundleNamespace = "walctl"

// releaseBundle reads what `make bundle` (part of `make release-check`)
// left in dist/: the rendered bundle and the digest of the image it built.
func releaseBundle(t *testing.T) (docs []*unstructured.Unstructured, imageRef string) {
	t.Helper()
	root, err := kubetest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := os.ReadFile(filepath.Join(root, "dist", "image", "digest"))
	if err != nil {
		t.Fatalf("%v: run `make bundle` (the release check builds the image and renders the bundle)", err)
	}
	// The digest names the image the OCI layout holds.
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	if b, err := os.ReadFile(filepath.Join(root, "dist", "image", "oci", "index.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 || index.Manifests[0].Digest != strings.TrimSpace(string(digest)) {
		t.Fatalf("dist/image/oci/index.json %+v (%v): want the one image of dist/image/digest %s", index, err, digest)
	}
	if _, err := os.Stat(filepath.Join(root, "dist", "image", "oci", "blobs", "sha256", strings.TrimPrefix(strings.TrimSpace(string(digest)), "sha256:"))); err != nil {
		t.Fatalf("the image's manifest blob: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "dist", "walctl-bundle.yaml"))
	if err != nil {
		t.Fatalf("%v: run `make bundle`", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("dist/walctl-bundle.yaml: %v", err)
		}
		if len(u.Object) > 0 {
			docs = append(docs, u)
		}
	}
	return docs, "ghcr.io/walctl/walctl@" + strings.TrimSpace(string(digest))
}

// applyBundle server-side applies every object, with strict field
// validation, into ns instead of the bundle's namespace (the RoleBinding's
// subjects follow).
func applyBundle(t *testing.T, docs []*unstructured.Unstructured, ns string) {
	t.Helper()
	ctx := testCtx(t)
	cfg := apiserver.Admin()
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, u := range docs {
		if u.GetNamespace() != bundleNamespace {
			t.Fatalf("%s %s is in namespace %q: everything in the bundle is namespaced to %q", u.GetKind(), u.GetName(), u.GetNamespace(), bundleNamespace)
		}
		u.SetNamespace(ns)
		if u.GetKind() == "RoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		body, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(ns).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "walctl-bundle-test", FieldValidation: "Strict"}); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// The bundle the release check rendered applies to the real kube-apiserver
// (server-side apply, strict validation) with every image — the masters',
// the workers' and the Job template's in its ConfigMap — pinned to the
// digest of the image the release check built; the masters' Deployment is
// wired to the ServiceAccount the Role is bound to and to the template the
// ConfigMap holds; credentials come only from Secret references; and,
// acting as that ServiceAccount with a minted token, the runner's
// operations succeed on a Job made from the mounted template while verbs
// outside the Role are forbidden.
func TestRealReleaseBundleAppliesAndItsRBACCoversTheRunner(t *testing.T) {
	docs, imageRef := releaseBundle(t)
	ctx := testCtx(t)
	ns := "bundle"
	if err := apiserver.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	applyBundle(t, docs, ns)

	admin := apiserver.AdminClient()
	master, err := admin.AppsV1().Deployments(ns).Get(ctx, "walctl-master", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := master.Spec.Replicas; r == nil || *r < 2 || *r > 3 {
		t.Errorf("master replicas %v, want 2–3", r)
	}
	deps, err := admin.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(deps.Items) < 2 {
		t.Fatalf("deployments %v %v: want the master and the workers", deps, err)
	}
	for _, d := range deps.Items {
		checkPodSpec(t, d.Name, d.Spec.Template.Spec, imageRef)
	}
	if _, err := admin.CoreV1().Services(ns).Get(ctx, "walctl-master", metav1.GetOptions{}); err != nil {
		t.Errorf("master Service: %v", err)
	}
	tplPath := mountedTemplate(t, master, ns)
	tpl, err := kube.LoadTemplate(tplPath)
	if err != nil {
		t.Fatalf("the bundle's Job template is refused: %v", err)
	}
	if tpl.Image() != imageRef {
		t.Fatalf("Job template image %s, want the built %s", tpl.Image(), imageRef)
	}

	sa := master.Spec.Template.Spec.ServiceAccountName
	cfg, err := apiserver.ServiceAccountConfig(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WaitAllowed(ctx, cfg, authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "batch", Resource: "jobs"}); err != nil {
		t.Fatal(err)
	}
	runner, err := kube.NewRunnerForConfig(cfg, kube.Config{Namespace: ns, Template: tpl, CPU: resource.MustParse("1"),
		Memory: resource.MustParse("2Gi"), Env: map[string]string{"WALCTL_ETCD_ENDPOINTS": "http://etcd:2379", "WALCTL_WAL": "wal:7070"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "bundle-a1"})
	if err != nil {
		t.Fatalf("Create as %s: %v", sa, err)
	}
	job, err := admin.BatchV1().Jobs(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil || job.Spec.Template.Spec.Containers[0].Image != imageRef {
		t.Fatalf("created Job %v %v: want image %s", job, err, imageRef)
	}
	if _, err := runner.Get(ctx, ref); err != nil {
		t.Fatalf("Get as %s: %v", sa, err)
	}
	if _, err := runner.PodsTerminal(ctx, ref); err != nil {
		t.Fatalf("PodsTerminal as %s: %v", sa, err)
	}
	if err := runner.Terminate(ctx, ref); err != nil {
		t.Fatalf("Terminate as %s: %v", sa, err)
	}
	checkForbidden(t, kubernetes.NewForConfigOrDie(cfg), ns, job)
}

// checkPodSpec: every container runs the built image as non-root, and every
// credential comes from a Secret reference (the bundle carries none).
func checkPodSpec(t *testing.T, name string, spec corev1.PodSpec, imageRef string) {
	t.Helper()
	if sc := spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("%s: not run as user 65532", name)
	}
	for _, c := range spec.Containers {
		if c.Image != imageRef {
			t.Errorf("%s/%s: image %s, want the built %s", name, c.Name, c.Image, imageRef)
		}
		for _, e := range c.Env {
			secretish := strings.Contains(e.Name, "TOKEN") || strings.Contains(e.Name, "KEY") || e.Name == "WALCTL_ETCD_ENDPOINTS"
			if secretish && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s/%s: %s is not a Secret reference", name, c.Name, e.Name)
			}
		}
	}
}

// mountedTemplate is the file WALCTL_MASTER_JOB_TEMPLATE names in the
// master's container, materialised from the ConfigMap volume mounted there
// (as the kubelet would), so the test loads what a master would load.
func mountedTemplate(t *testing.T, master *appsv1.Deployment, ns string) string {
	t.Helper()
	spec := master.Spec.Template.Spec
	c := spec.Containers[0]
	var path string
	for _, e := range c.Env {
		if e.Name == "WALCTL_MASTER_JOB_TEMPLATE" {
			path = e.Value
		}
	}
	for _, m := range c.VolumeMounts {
		if path == "" || filepath.Dir(path) != m.MountPath {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, err := apiserver.AdminClient().CoreV1().ConfigMaps(ns).Get(testCtx(t), v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the template volume's ConfigMap: %v", err)
			}
			data, ok := cm.Data[filepath.Base(path)]
			if !ok {
				t.Fatalf("ConfigMap %s has no key %s", cm.Name, filepath.Base(path))
			}
			out := filepath.Join(t.TempDir(), filepath.Base(path))
			if err := os.WriteFile(out, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("WALCTL_MASTER_JOB_TEMPLATE=%q is not a file of a ConfigMap volume mounted in the master", path)
	return ""
}

// checkForbidden: verbs outside the Role, as the bundle's ServiceAccount.
func checkForbidden(t *testing.T, m kubernetes.Interface, ns string, job *batchv1.Job) {
	t.Helper()
	ctx := testCtx(t)
	other := ns + "-other"
	if err := apiserver.CreateNamespace(ctx, other); err != nil {
		t.Fatal(err)
	}
	foreign := job.DeepCopy()
	foreign.Namespace, foreign.ResourceVersion, foreign.UID, foreign.Name = other, "", "", "foreign"
	foreign.Spec.Selector, foreign.Spec.Template.Labels = nil, nil
	forbidden := map[string]error{
		"list Jobs": func() error { _, err := m.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); return err }(),
		"patch a Job": func() error {
			_, err := m.BatchV1().Jobs(ns).Patch(ctx, job.Name, types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
			return err
		}(),
		"read a Secret":   func() error { _, err := m.CoreV1().Secrets(ns).Get(ctx, "walctl-s3", metav1.GetOptions{}); return err }(),
		"read ConfigMaps": func() error { _, err := m.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); return err }(),
		"scale its own Deployment": func() error {
			_, err := m.AppsV1().Deployments(ns).Patch(ctx, "walctl-master", types.MergePatchType, []byte(`{"spec":{"replicas":9}}`), metav1.PatchOptions{})
			return err
		}(),
		"create a Job in another namespace": func() error {
			_, err := m.BatchV1().Jobs(other).Create(ctx, foreign, createOpts)
			return err
		}(),
		"delete a Pod": m.CoreV1().Pods(ns).Delete(ctx, "any", metav1.DeleteOptions{}),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the bundle's master could %s: %v (want Forbidden)", what, err)
		}
	}
}
