package kube

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

// Template is a reviewed Job manifest (deploy/catchup-job-template.yaml): it
// fixes the image, the Pod's security settings, volumes and static
// environment of every catch-up Job. The runner adds what only the
// controller may decide — name, identity, command arguments, resources,
// priority — and nothing a caller supplies.
//
// A template is refused (ErrBadTemplate) when it
//   - is not a batch/v1 Job or has unknown fields;
//   - names the Job, its namespace or owners, or uses walctl's label keys;
//   - has other than exactly one container, or any init container;
//   - uses an image without a digest (@sha256:…) or an explicit tag other
//     than "latest";
//   - sets container args, resources, or a command of more than the walctl
//     executable;
//   - sets a deadline (activeDeadlineSeconds on the Job or the Pod), a TTL,
//     retries (backoffLimit other than 0, a Pod failure policy, per-index
//     limits), parallelism or completions other than 1, a selector, suspend,
//     managedBy, a restart policy other than Never, or any priority setting;
//   - defines an environment variable the controller sets.
type Template struct {
	job  *batchv1.Job
	path string
}

// LoadTemplate reads and validates a template file.
func LoadTemplate(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("job template: %w", err)
	}
	t, err := ParseTemplate(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.path = path
	return t, nil
}

// ParseTemplate decodes (strictly) and validates a template manifest.
func ParseTemplate(manifest []byte) (*Template, error) {
	obj, err := decodeStrict(manifest)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTemplate, err)
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, fmt.Errorf("%w: want a batch/v1 Job, got %T", ErrBadTemplate, obj)
	}
	if err := validateTemplate(job); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTemplate, err)
	}
	return &Template{job: job}, nil
}

// Image is the template's pinned container image.
func (t *Template) Image() string { return t.job.Spec.Template.Spec.Containers[0].Image }

// Path is the file the template was loaded from, or "" when parsed from bytes.
func (t *Template) Path() string { return t.path }

// strictCodec decodes YAML or JSON manifests of built-in kinds and rejects
// unknown and duplicate fields.
var strictCodec = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

func decodeStrict(manifest []byte) (any, error) {
	obj, gvk, err := strictCodec.Decode(manifest, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Group == "batch" && gvk.Version != "v1" {
		return nil, fmt.Errorf("apiVersion %s: want batch/v1", gvk.GroupVersion())
	}
	return obj, nil
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// checkImage accepts repo@sha256:<64 hex>, repo:tag@sha256:<64 hex> and
// repo:tag with an explicit tag other than "latest". A registry port
// (host:5000/repo) is not a tag.
func checkImage(image string) error {
	if image == "" || strings.TrimSpace(image) != image {
		return fmt.Errorf("image %q is empty or padded", image)
	}
	if name, digest, ok := strings.Cut(image, "@"); ok {
		if !digestRE.MatchString(digest) {
			return fmt.Errorf("image %q: digest must be sha256:<64 lowercase hex>", image)
		}
		image = name
		if !strings.Contains(image[strings.LastIndex(image, "/")+1:], ":") {
			return nil
		}
	}
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	switch {
	case !ok:
		return fmt.Errorf("image %q has neither a digest nor a tag; pin it (repo@sha256:…)", image)
	case strings.EqualFold(tag, "latest"):
		return fmt.Errorf("image %q uses the moving tag \"latest\"; pin it (repo@sha256:…)", image)
	case !tagRE.MatchString(tag):
		return fmt.Errorf("image %q: malformed tag %q", image, tag)
	}
	return nil
}

func validateTemplate(job *batchv1.Job) error {
	m := job.ObjectMeta
	if m.Name != "" || m.GenerateName != "" || m.Namespace != "" || len(m.OwnerReferences) > 0 || len(m.Finalizers) > 0 {
		return fmt.Errorf("metadata must not set name, generateName, namespace, ownerReferences or finalizers: the runner does")
	}
	if err := checkKeys("metadata", m.Labels, m.Annotations); err != nil {
		return err
	}
	s := job.Spec
	switch {
	case s.Parallelism != nil && *s.Parallelism != 1, s.Completions != nil && *s.Completions != 1:
		return fmt.Errorf("spec.parallelism and spec.completions must be unset or 1: one executor per table")
	case s.BackoffLimit != nil && *s.BackoffLimit != 0, s.BackoffLimitPerIndex != nil, s.MaxFailedIndexes != nil, s.PodFailurePolicy != nil:
		return fmt.Errorf("spec must not retry Pods (backoffLimit 0, no podFailurePolicy or per-index limits): the controller owns retries")
	case s.ActiveDeadlineSeconds != nil:
		return fmt.Errorf("spec.activeDeadlineSeconds must be unset: catch-up follows progress, not elapsed time")
	case s.TTLSecondsAfterFinished != nil:
		return fmt.Errorf("spec.ttlSecondsAfterFinished must be unset: the controller deletes Jobs it has observed")
	case s.Selector != nil, s.ManualSelector != nil && *s.ManualSelector:
		return fmt.Errorf("spec.selector and spec.manualSelector must be unset: Pods are selected by the Job's UID")
	case s.Suspend != nil && *s.Suspend, s.ManagedBy != nil, s.SuccessPolicy != nil:
		return fmt.Errorf("spec.suspend, spec.managedBy and spec.successPolicy must be unset")
	case s.CompletionMode != nil && *s.CompletionMode != batchv1.NonIndexedCompletion:
		return fmt.Errorf("spec.completionMode must be unset or NonIndexed")
	}
	if err := checkKeys("spec.template.metadata", s.Template.Labels, s.Template.Annotations); err != nil {
		return err
	}
	return validatePodSpec(&s.Template.Spec)
}

func validatePodSpec(p *corev1.PodSpec) error {
	switch {
	case p.RestartPolicy != "" && p.RestartPolicy != corev1.RestartPolicyNever:
		return fmt.Errorf("restartPolicy %q: must be unset or Never (one execution is one process)", p.RestartPolicy)
	case p.ActiveDeadlineSeconds != nil:
		return fmt.Errorf("pod activeDeadlineSeconds must be unset: catch-up follows progress, not elapsed time")
	case p.PriorityClassName != "" || p.Priority != nil || p.PreemptionPolicy != nil:
		return fmt.Errorf("priorityClassName, priority and preemptionPolicy come from configuration, not the template")
	case len(p.InitContainers) > 0 || len(p.EphemeralContainers) > 0:
		return fmt.Errorf("init and ephemeral containers are not allowed")
	case len(p.Containers) != 1:
		return fmt.Errorf("want exactly one container (the walctl executor), got %d", len(p.Containers))
	case p.Overhead != nil || p.Resources != nil:
		return fmt.Errorf("pod-level resources and overhead come from configuration, not the template")
	}
	c := &p.Containers[0]
	if err := checkImage(c.Image); err != nil {
		return err
	}
	switch {
	case len(c.Command) > 1:
		return fmt.Errorf("container command may only name the walctl executable, got %q", c.Command)
	case len(c.Args) > 0:
		return fmt.Errorf("container args are set by the runner (catchup run --table T --job ID)")
	case len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 || len(c.Resources.Claims) > 0:
		return fmt.Errorf("container resources come from configuration (requests equal limits)")
	}
	for _, e := range c.Env {
		if e.Name == EnvTable || e.Name == EnvJobID {
			return fmt.Errorf("env %s is set by the runner", e.Name)
		}
	}
	return nil
}

// checkKeys refuses labels and annotations in the key spaces the runner uses
// to recognise its own Jobs, and the labels Kubernetes uses to select a Job's
// Pods.
func checkKeys(where string, maps ...map[string]string) error {
	for _, m := range maps {
		for k := range m {
			if strings.HasPrefix(k, walctlKeyPrefix) || k == LabelManagedBy || k == LabelComponent ||
				strings.HasPrefix(k, "batch.kubernetes.io/") || k == "job-name" || k == "controller-uid" {
				return fmt.Errorf("%s: key %q is reserved for the runner and Kubernetes", where, k)
			}
		}
	}
	return nil
}
