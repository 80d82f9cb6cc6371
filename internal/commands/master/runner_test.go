package master

import (
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
)

// Executors of tables on S3 get the master's S3 settings except the keys:
// those reach a Job only from the Secret named by master.job_s3_secret.
func TestS3EnvOfExecutorsCarriesNoKey(t *testing.T) {
	t.Setenv("WALCTL_MASTER_TOKEN", "tok")
	t.Setenv("WALCTL_S3_ENDPOINT", "http://objects:9000")
	t.Setenv("WALCTL_S3_REGION", "eu-central-1")
	t.Setenv("WALCTL_S3_ACCESS_KEY", "AKIAMASTERKEY")
	t.Setenv("WALCTL_S3_SECRET_KEY", "master-secret-value")
	t.Setenv("WALCTL_S3_ALLOW_UNSAFE_STORE", "true")
	t.Setenv("WALCTL_LANCE_ROOT", "s3://lake-bucket/t")
	_, f, err := cmdtest.Parse(t, NewCmdRun, []string{"--job-s3-secret", "walctl-s3"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Config.Global.LanceLocation.IsS3() || f.Config.String(KeyJobS3Secret) != "walctl-s3" {
		t.Fatalf("lance root %v, secret %q", f.Config.Global.LanceLocation, f.Config.String(KeyJobS3Secret))
	}
	env := map[string]string{}
	addS3Env(f.Config, env)
	want := map[string]string{"WALCTL_S3_ENDPOINT": "http://objects:9000", "WALCTL_S3_REGION": "eu-central-1",
		"WALCTL_S3_PATH_STYLE": "auto", "WALCTL_S3_ALLOW_UNSAFE_STORE": "true"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	for k, v := range env {
		if v == "AKIAMASTERKEY" || v == "master-secret-value" || k == "WALCTL_S3_SECRET_KEY" || k == "WALCTL_S3_ACCESS_KEY" {
			t.Errorf("executor env carries a key: %s=%s", k, v)
		}
	}
}
