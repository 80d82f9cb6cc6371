package kube

import (
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/walctl/walctl/internal/core/errs"
)

// S3SecretEnv are the variables an executor reads from the configured
// Secret when the tables live on S3: the standard AWS credential chain picks
// them up, so no key is ever a flag, a setting value in the Job or an API
// field.
var S3SecretEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

var secretEnvRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// validateSecret checks SecretName and SecretEnv: both or neither, a valid
// Secret name, and variables that nothing else in the Job sets.
func (c *Config) validateSecret(defined map[string]bool) error {
	if (c.SecretName == "") != (len(c.SecretEnv) == 0) {
		return fmt.Errorf("kubernetes runner: a credentials Secret (%q) needs the variables it fills (%q) and the other way round: %w", c.SecretName, c.SecretEnv, errs.ErrInvalid)
	}
	if c.SecretName == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(c.SecretName); len(msgs) > 0 {
		return fmt.Errorf("kubernetes runner: secret name %q: %v: %w", c.SecretName, msgs, errs.ErrInvalid)
	}
	seen := map[string]bool{}
	for _, k := range c.SecretEnv {
		_, inEnv := c.Env[k]
		if !secretEnvRE.MatchString(k) || k == EnvTable || k == EnvJobID || defined[k] || inEnv || seen[k] {
			return fmt.Errorf("kubernetes runner: secret env %q: want [A-Z_][A-Z0-9_]*, once, not set by the template, the runner or the controller: %w", k, errs.ErrInvalid)
		}
		seen[k] = true
	}
	return nil
}

// secretEnv renders SecretEnv as references to the Secret, in name order.
func (c *Config) secretEnv() []corev1.EnvVar {
	keys := append([]string(nil), c.SecretEnv...)
	sort.Strings(keys)
	out := make([]corev1.EnvVar, 0, len(keys))
	for _, k := range keys {
		out = append(out, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: c.SecretName}, Key: k,
		}}})
	}
	return out
}
