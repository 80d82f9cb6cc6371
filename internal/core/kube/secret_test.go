package kube

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

func secretConfig(t *testing.T, mutate func(*Config)) *Config {
	t.Helper()
	tpl, err := LoadTemplate("../../../deploy/catchup-job-template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{Namespace: "ns", Template: tpl, CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"),
		Env: map[string]string{"WALCTL_LANCE_ROOT": "s3://b-one/p"}, SecretName: "walctl-s3", SecretEnv: S3SecretEnv}
	mutate(c)
	return c
}

func TestSecretSettingsAreValidated(t *testing.T) {
	for name, m := range map[string]func(*Config){
		"secret without env":  func(c *Config) { c.SecretEnv = nil },
		"env without secret":  func(c *Config) { c.SecretName = "" },
		"bad secret name":     func(c *Config) { c.SecretName = "Walctl_S3" },
		"lower-case variable": func(c *Config) { c.SecretEnv = []string{"aws_access_key_id"} },
		"identity variable":   func(c *Config) { c.SecretEnv = []string{EnvTable} },
		"also a plain value":  func(c *Config) { c.SecretEnv = []string{"WALCTL_LANCE_ROOT"} },
		"set by the template": func(c *Config) { c.SecretEnv = []string{"WALCTL_LOG_LEVEL"} },
		"named twice":         func(c *Config) { c.SecretEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"} },
	} {
		if err := secretConfig(t, m).validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := secretConfig(t, func(*Config) {}).validate(); err != nil {
		t.Fatal(err)
	}
	if err := secretConfig(t, func(c *Config) { c.SecretName, c.SecretEnv = "", nil }).validate(); err != nil {
		t.Fatalf("no secret at all: %v", err)
	}
}

func TestSecretEnvIsAReferenceNeverAValue(t *testing.T) {
	job := secretConfig(t, func(*Config) {}).buildJob(catchup.JobSpec{Table: "t", Name: "j"})
	refs := 0
	for _, v := range job.Spec.Template.Spec.Containers[0].Env {
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			refs++
			if v.Value != "" || v.ValueFrom.SecretKeyRef.Name != "walctl-s3" || v.ValueFrom.SecretKeyRef.Key != v.Name {
				t.Errorf("env %+v", v)
			}
		}
	}
	if refs != len(S3SecretEnv) {
		t.Fatalf("%d secret references, want %d", refs, len(S3SecretEnv))
	}
}
