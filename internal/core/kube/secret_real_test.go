package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/kube"
)

// A catch-up Job for tables on S3 gets its S3 settings as plain env and its
// credentials only as references to a Secret: the created Job (as the API
// server stores it) holds no key, and the master's identity cannot even
// read the Secret, so the credentials never pass through the master.
func TestRealJobRefersToTheS3CredentialsSecret(t *testing.T) {
	const accessKey, secretKey = "AKIAWALCTLTESTKEY001", "wJalrXUtnFEMI-walctl-test-secret-value"
	e := newEnv(t, func(c *kube.Config) {
		c.Env["WALCTL_LANCE_ROOT"] = "s3://lake-bucket/tables"
		c.Env["WALCTL_S3_ENDPOINT"] = "http://objects.storage:9000"
		c.SecretName, c.SecretEnv = "walctl-s3", kube.S3SecretEnv
	})
	ctx := testCtx(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "walctl-s3"},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey}}
	if _, err := e.admin.CoreV1().Secrets(e.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref, err := e.runner.Create(ctx, catchup.JobSpec{Table: "orders", Name: "s3-a1"})
	if err != nil {
		t.Fatal(err)
	}
	job, err := e.admin.BatchV1().Jobs(e.ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{accessKey, secretKey} {
		if strings.Contains(string(stored), v) {
			t.Fatalf("the stored Job contains a credential %q:\n%s", v, stored)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, v := range job.Spec.Template.Spec.Containers[0].Env {
		env[v.Name] = v
	}
	for _, k := range kube.S3SecretEnv {
		v, ok := env[k]
		if !ok || v.Value != "" || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil ||
			v.ValueFrom.SecretKeyRef.Name != "walctl-s3" || v.ValueFrom.SecretKeyRef.Key != k {
			t.Errorf("env %s = %+v, want a secretKeyRef to walctl-s3/%s", k, v, k)
		}
	}
	if env["WALCTL_S3_ENDPOINT"].Value != "http://objects.storage:9000" || env["WALCTL_LANCE_ROOT"].Value != "s3://lake-bucket/tables" {
		t.Errorf("S3 settings not passed: %+v", env)
	}
	_, err = e.masterClient().CoreV1().Secrets(e.ns).Get(ctx, "walctl-s3", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the master's identity reading the Secret: %v, want Forbidden", err)
	}
}
