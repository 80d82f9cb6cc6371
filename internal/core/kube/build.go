package kube

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// Environment variables the runner sets on every executor; the template may
// not define them.
const (
	EnvTable = "WALCTL_TABLE"
	EnvJobID = "WALCTL_JOB_ID"
)

// DefaultCallTimeout bounds an API call whose ctx has no deadline.
const DefaultCallTimeout = 30 * time.Second

// DefaultExecutable is the command run in the container when the template
// does not name the walctl executable.
const DefaultExecutable = "walctl"

// Config is the operator's configuration of the Kubernetes runner. Nothing
// in it comes from API callers.
type Config struct {
	// Namespace holds the Jobs; the master's Role is bound there.
	Namespace string
	// Template is the reviewed Job template.
	Template *Template
	// CPU and Memory are each the executor's request and its limit.
	CPU    resource.Quantity
	Memory resource.Quantity
	// PriorityClassName, when set, names a PriorityClass whose
	// preemptionPolicy is Never; the runner then also sets the Pod's
	// preemptionPolicy to Never, so a class that would preempt makes the
	// API server reject the Pods instead of evicting other workloads. Empty
	// leaves the cluster's default priority.
	PriorityClassName string
	// Env is controller-set environment (WALCTL_ETCD_ENDPOINTS, WALCTL_WAL,
	// WALCTL_LANCE_ROOT, …): names must start with WALCTL_ and not be one of
	// the identity variables or defined by the template.
	Env map[string]string
	// SecretName names a Secret in Namespace holding credentials the
	// executor needs (for tables on S3: AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY). Its values never pass through the runner or
	// the Job object: each variable of SecretEnv is a secretKeyRef to the
	// key of the same name, resolved by the kubelet. Empty: no Secret.
	SecretName string
	// SecretEnv names the variables filled from SecretName.
	SecretEnv []string
	// CallTimeout bounds each call whose ctx has no deadline (default
	// DefaultCallTimeout).
	CallTimeout time.Duration
}

var envNameRE = regexp.MustCompile(`^WALCTL_[A-Z0-9_]+$`)

func (c *Config) validate() error {
	if c.Template == nil {
		return fmt.Errorf("kubernetes runner: no job template: %w", errs.ErrInvalid)
	}
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		return fmt.Errorf("kubernetes runner: namespace %q: %v: %w", c.Namespace, msgs, errs.ErrInvalid)
	}
	if c.CPU.Sign() <= 0 || c.Memory.Sign() <= 0 {
		return fmt.Errorf("kubernetes runner: cpu (%s) and memory (%s) must be positive: %w", c.CPU.String(), c.Memory.String(), errs.ErrInvalid)
	}
	if c.PriorityClassName != "" {
		if msgs := validation.IsDNS1123Subdomain(c.PriorityClassName); len(msgs) > 0 {
			return fmt.Errorf("kubernetes runner: priority class %q: %v: %w", c.PriorityClassName, msgs, errs.ErrInvalid)
		}
	}
	defined := map[string]bool{}
	for _, e := range c.Template.job.Spec.Template.Spec.Containers[0].Env {
		defined[e.Name] = true
	}
	for k := range c.Env {
		if !envNameRE.MatchString(k) || k == EnvTable || k == EnvJobID || defined[k] {
			return fmt.Errorf("kubernetes runner: env %q: want WALCTL_[A-Z0-9_]+, not an identity variable, not defined by the template: %w", k, errs.ErrInvalid)
		}
	}
	if err := c.validateSecret(defined); err != nil {
		return err
	}
	if c.CallTimeout < 0 {
		return fmt.Errorf("kubernetes runner: negative call timeout: %w", errs.ErrInvalid)
	}
	return nil
}

// buildJob renders spec's Job from the template and the configuration. It is
// deterministic: the same spec always yields the same object.
func (c *Config) buildJob(spec catchup.JobSpec) *batchv1.Job {
	job := c.Template.job.DeepCopy()
	job.TypeMeta.APIVersion, job.TypeMeta.Kind = "batch/v1", "Job"
	job.Name = spec.Name
	job.Namespace = c.Namespace
	job.Labels = merge(job.Labels, identityLabels(spec))
	job.Annotations = merge(job.Annotations, identityAnnotations(spec))

	js := &job.Spec
	js.BackoffLimit = ptr.To[int32](0)
	js.Parallelism = ptr.To[int32](1)
	js.Completions = ptr.To[int32](1)
	js.ActiveDeadlineSeconds = nil

	pt := &js.Template
	pt.Labels = merge(pt.Labels, identityLabels(spec))
	pt.Annotations = merge(pt.Annotations, identityAnnotations(spec))
	ps := &pt.Spec
	ps.RestartPolicy = corev1.RestartPolicyNever
	if c.PriorityClassName != "" {
		ps.PriorityClassName = c.PriorityClassName
		ps.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	}

	ctr := &ps.Containers[0]
	if len(ctr.Command) == 0 {
		ctr.Command = []string{DefaultExecutable}
	}
	ctr.Args = []string{"catchup", "run", "--table", spec.Table, "--job", spec.Name}
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: EnvTable, Value: spec.Table}, corev1.EnvVar{Name: EnvJobID, Value: spec.Name})
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	ctr.Env = append(ctr.Env, c.secretEnv()...)
	rl := corev1.ResourceList{corev1.ResourceCPU: c.CPU.DeepCopy(), corev1.ResourceMemory: c.Memory.DeepCopy()}
	ctr.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
	return job
}

func merge(base, add map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}
