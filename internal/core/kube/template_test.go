package kube

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

const shippedTemplate = "../../../deploy/catchup-job-template.yaml"

func loadShipped(t *testing.T) *Template {
	t.Helper()
	tpl, err := LoadTemplate(shippedTemplate)
	if err != nil {
		t.Fatalf("shipped template: %v", err)
	}
	return tpl
}

func encode(t *testing.T, job *batchv1.Job) []byte {
	t.Helper()
	job.APIVersion, job.Kind = "batch/v1", "Job"
	var b bytes.Buffer
	if err := strictCodec.Encode(job, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestShippedTemplateIsAccepted(t *testing.T) {
	tpl := loadShipped(t)
	if !strings.Contains(tpl.Image(), "@sha256:") {
		t.Errorf("shipped image %q is not pinned by digest", tpl.Image())
	}
}

func TestCheckImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	good := []string{
		"ghcr.io/walctl/walctl@" + digest,
		"ghcr.io/walctl/walctl:v1.4.2@" + digest,
		"ghcr.io/walctl/walctl:v1.4.2",
		"localhost:5000/walctl:1.0",
		"walctl:2026-11-29_rc1",
	}
	bad := []string{
		"", " walctl:v1", "walctl", "ghcr.io/walctl/walctl", "walctl:latest", "walctl:Latest",
		"localhost:5000/walctl", "walctl:", "walctl@sha256:abc", "walctl@" + strings.ToUpper(digest),
		"walctl@md5:" + strings.Repeat("a", 32), "walctl:-x", "walctl:latest@sha256:nothex",
	}
	for _, img := range good {
		if err := checkImage(img); err != nil {
			t.Errorf("%q refused: %v", img, err)
		}
	}
	for _, img := range bad {
		if err := checkImage(img); err == nil {
			t.Errorf("%q accepted", img)
		}
	}
}

func TestTemplateRefusals(t *testing.T) {
	base := loadShipped(t).job
	if _, err := ParseTemplate(encode(t, base.DeepCopy())); err != nil {
		t.Fatalf("the unmodified template does not round-trip: %v", err)
	}
	cases := map[string]func(j *batchv1.Job){
		"floating image":        func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "ghcr.io/walctl/walctl:latest" },
		"untagged image":        func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "ghcr.io/walctl/walctl" },
		"job deadline":          func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600) },
		"pod deadline":          func(j *batchv1.Job) { j.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600) },
		"retries":               func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](6) },
		"pod failure policy":    func(j *batchv1.Job) { j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{} },
		"ttl":                   func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](60) },
		"parallelism":           func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) },
		"suspend":               func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) },
		"manual selector":       func(j *batchv1.Job) { j.Spec.ManualSelector = ptr.To(true) },
		"managed by":            func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("other") },
		"name":                  func(j *batchv1.Job) { j.Name = "fixed" },
		"namespace":             func(j *batchv1.Job) { j.Namespace = "kube-system" },
		"walctl label":          func(j *batchv1.Job) { j.Labels[LabelTable] = "x" },
		"pod identity label":    func(j *batchv1.Job) { j.Spec.Template.Labels["batch.kubernetes.io/controller-uid"] = "x" },
		"pod walctl annotation": func(j *batchv1.Job) { j.Spec.Template.Annotations = map[string]string{AnnotationJobID: "x"} },
		"restart on failure":    func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		"priority class":        func(j *batchv1.Job) { j.Spec.Template.Spec.PriorityClassName = "system-cluster-critical" },
		"preemption policy":     func(j *batchv1.Job) { j.Spec.Template.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority) },
		"args":                  func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Args = []string{"catchup", "run"} },
		"shell command":         func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "x"} },
		"identity env":          func(j *batchv1.Job) { addEnv(j, EnvTable, "x") },
		"job id env":            func(j *batchv1.Job) { addEnv(j, EnvJobID, "x") },
		"resources":             func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Resources.Limits = cpu("1") },
		"second container": func(j *batchv1.Job) {
			c := j.Spec.Template.Spec.Containers
			j.Spec.Template.Spec.Containers = append(c, c[0])
		},
		"init container":         func(j *batchv1.Job) { j.Spec.Template.Spec.InitContainers = j.Spec.Template.Spec.Containers },
		"indexed":                func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) },
		"per-index backoff":      func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](1) },
		"pod-level resources":    func(j *batchv1.Job) { j.Spec.Template.Spec.Resources = &corev1.ResourceRequirements{Limits: cpu("1")} },
		"job finalizer":          func(j *batchv1.Job) { j.Finalizers = []string{"x/y"} },
		"legacy job-name label":  func(j *batchv1.Job) { j.Spec.Template.Labels["job-name"] = "x" },
		"managed-by label (job)": func(j *batchv1.Job) { j.Labels[LabelManagedBy] = "helm" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			j := base.DeepCopy()
			mutate(j)
			_, err := ParseTemplate(encode(t, j))
			if !errors.Is(err, ErrBadTemplate) || !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("got %v, want ErrBadTemplate (errs.ErrInvalid)", err)
			}
		})
	}
	raw := map[string]string{
		"unknown field": "apiVersion: batch/v1\nkind: Job\nspec:\n  backofLimit: 3\n  template:\n    spec:\n      containers: [{name: w, image: 'w:v1'}]\n",
		"not a job":     "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: w, image: 'w:v1'}]\n",
		"old version":   "apiVersion: batch/v1beta1\nkind: Job\n",
		"garbage":       "{{{",
	}
	for name, m := range raw {
		if _, err := ParseTemplate([]byte(m)); !errors.Is(err, ErrBadTemplate) {
			t.Errorf("%s: got %v, want ErrBadTemplate", name, err)
		}
	}
}

func addEnv(j *batchv1.Job, k, v string) {
	c := &j.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
}

func cpu(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
}

func testConfig(t *testing.T) Config {
	return Config{
		Namespace: "walctl",
		Template:  loadShipped(t),
		CPU:       resource.MustParse("2"),
		Memory:    resource.MustParse("3Gi"),
		Env:       map[string]string{"WALCTL_WAL": "wal:7000", "WALCTL_ETCD_ENDPOINTS": "http://etcd:2379"},
	}
}

func TestBuildJobSetsWhatOnlyTheControllerMay(t *testing.T) {
	cfg := testConfig(t)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	spec := catchup.JobSpec{Table: "orders", Name: "r7-a2"}
	job := cfg.buildJob(spec)
	if !reflect.DeepEqual(job, cfg.buildJob(spec)) {
		t.Fatal("buildJob not deterministic (or it mutated the template)")
	}
	ps := job.Spec.Template.Spec
	c := ps.Containers[0]
	wantArgs := []string{"catchup", "run", "--table", "orders", "--job", "r7-a2"}
	switch {
	case job.Name != spec.Name || job.Namespace != "walctl":
		t.Errorf("name %s/%s", job.Namespace, job.Name)
	case *job.Spec.BackoffLimit != 0 || job.Spec.ActiveDeadlineSeconds != nil || ps.ActiveDeadlineSeconds != nil:
		t.Errorf("backoffLimit %v, activeDeadlineSeconds %v/%v", *job.Spec.BackoffLimit, job.Spec.ActiveDeadlineSeconds, ps.ActiveDeadlineSeconds)
	case ps.RestartPolicy != corev1.RestartPolicyNever || ps.PriorityClassName != "" || ps.PreemptionPolicy != nil:
		t.Errorf("restart %q, priority %q/%v", ps.RestartPolicy, ps.PriorityClassName, ps.PreemptionPolicy)
	case !reflect.DeepEqual(c.Args, wantArgs) || !reflect.DeepEqual(c.Command, []string{"/usr/local/bin/walctl"}):
		t.Errorf("command %q args %q", c.Command, c.Args)
	case !reflect.DeepEqual(c.Resources.Requests, c.Resources.Limits) || c.Resources.Limits.Cpu().String() != "2" || c.Resources.Limits.Memory().String() != "3Gi":
		t.Errorf("resources %v", c.Resources)
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name+"="+e.Value)
	}
	want := "WALCTL_LOG_LEVEL=info WALCTL_TABLE=orders WALCTL_JOB_ID=r7-a2 WALCTL_ETCD_ENDPOINTS=http://etcd:2379 WALCTL_WAL=wal:7000"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
	for _, m := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if !isOurs(m, job.Annotations, spec) || m["app.kubernetes.io/name"] != "walctl" {
			t.Errorf("labels %v", m)
		}
	}

	cfg.PriorityClassName = "walctl-catchup"
	ps = cfg.buildJob(spec).Spec.Template.Spec
	if ps.PriorityClassName != "walctl-catchup" || ps.PreemptionPolicy == nil || *ps.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("priority class %q preemption %v", ps.PriorityClassName, ps.PreemptionPolicy)
	}
}

func TestConfigRefusals(t *testing.T) {
	cases := map[string]func(*Config){
		"no template":       func(c *Config) { c.Template = nil },
		"bad namespace":     func(c *Config) { c.Namespace = "Bad_NS" },
		"no cpu":            func(c *Config) { c.CPU = resource.Quantity{} },
		"negative memory":   func(c *Config) { c.Memory = resource.MustParse("-1") },
		"foreign env":       func(c *Config) { c.Env["PATH"] = "/tmp" },
		"identity env":      func(c *Config) { c.Env[EnvJobID] = "x" },
		"template env":      func(c *Config) { c.Env["WALCTL_LOG_LEVEL"] = "debug" },
		"bad priority name": func(c *Config) { c.PriorityClassName = "Not/Valid" },
	}
	for name, mutate := range cases {
		cfg := testConfig(t)
		mutate(&cfg)
		if _, err := NewRunner(nil, cfg, nil); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: got %v, want errs.ErrInvalid", name, err)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: batch/v1\nkind: Job\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTemplate(p); !errors.Is(err, ErrBadTemplate) || !strings.Contains(err.Error(), p) {
		t.Errorf("empty Job template: got %v, want ErrBadTemplate naming the file", err)
	}
}
