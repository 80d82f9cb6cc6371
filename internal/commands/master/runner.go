package master

import (
	"context"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/catchup/localrunner"
	"github.com/walctl/walctl/internal/core/kube"
)

// newRunner builds the configured catch-up Job runner.
func newRunner(ctx context.Context, f *cmdutil.Factory, p catchup.Policy) (catchup.Runner, error) {
	if f.Config.String(KeyRunner) == "kubernetes" {
		f.Logger.Info("catch-up job runner: kubernetes", "namespace", f.Config.String(KeyNamespace))
		return newKubeRunner(ctx, f, p)
	}
	f.Logger.Info("catch-up job runner: local processes")
	args, err := childArgs(ctx, f)
	if err != nil {
		return nil, err
	}
	return localrunner.New(localrunner.Config{
		GlobalArgs: args,
		DropEnv:    []string{"WALCTL_MASTER_TOKEN"},
		LogDir:     filepath.Join(f.Config.Global.DataDir, "master", "jobs"),
		Grace:      f.Config.Duration(KeyLocalGrace),
		Logger:     f.Logger,
	})
}

// childArgs point an executor at this master's dependencies: the same data
// dir, Lance root, etcd (the embedded one's endpoint included) and WAL (a
// local WAL is reached through the address this master shares).
func childArgs(ctx context.Context, f *cmdutil.Factory) ([]string, error) {
	g := f.Config.Global
	eps, err := f.EtcdEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	args := []string{"--data-dir", g.DataDir, "--lance-root", g.LanceRoot, "--etcd-prefix", g.EtcdPrefix,
		"--etcd-endpoints", strings.Join(eps, ","), "--command-timeout", g.CommandTimeout.String(),
		"--log-level", g.LogLevel, "--output", "json"}
	if g.WAL != "" {
		args = append(args, "--wal", g.WAL)
	}
	if g.ConfigFile != "" {
		args = append(args, "--config", g.ConfigFile)
	}
	return args, nil
}

// Settings of the Kubernetes runner's API access (in-cluster by default).
const (
	KeyKubeAPI       = "master.kube_api"
	KeyKubeTokenFile = "master.kube_token_file"
	KeyKubeCAFile    = "master.kube_ca_file"
	KeyJobS3Secret   = "master.job_s3_secret"
)

func init() {
	cmdutil.Register(
		cmdutil.Setting{Key: KeyKubeAPI, Default: "", Usage: "kubernetes runner: API server URL (default: in-cluster service account)"},
		cmdutil.Setting{Key: KeyKubeTokenFile, Default: "", Usage: "kubernetes runner: bearer token file for master.kube_api"},
		cmdutil.Setting{Key: KeyKubeCAFile, Default: "", Usage: "kubernetes runner: CA bundle verifying master.kube_api"},
		cmdutil.Setting{Key: KeyJobS3Secret, Default: "", Usage: "kubernetes runner: Secret in master.namespace with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for tables on S3; Jobs refer to it, never copy it (empty: the Pod's own AWS identity)"},
	)
}

// newKubeRunner builds the Kubernetes Job runner: Jobs from the reviewed
// template in master.namespace, CPU and memory requests equal to limits,
// and the executor pointed at this master's etcd, WAL and Lance root
// through WALCTL_* environment. Secrets never travel that way: S3 keys come
// from the Secret named by master.job_s3_secret (secretKeyRef), other
// secrets such as the WAL token from the template, from a Secret.
func newKubeRunner(_ context.Context, f *cmdutil.Factory, p catchup.Policy) (catchup.Runner, error) {
	c := f.Config
	g := c.Global
	if err := validateKube(c); err != nil {
		return nil, err
	}
	tmpl, err := kube.LoadTemplate(c.String(KeyJobTemplate))
	if err != nil {
		return nil, err
	}
	cpu, err := resource.ParseQuantity(c.String(KeyJobCPU))
	if err != nil {
		return nil, cmdutil.FlagErrorf("--job-cpu %q: %v", c.String(KeyJobCPU), err)
	}
	mem, err := resource.ParseQuantity(c.String(KeyJobMemory))
	if err != nil {
		return nil, cmdutil.FlagErrorf("--job-memory %q: %v", c.String(KeyJobMemory), err)
	}
	env := p.ExecutorEnv()
	env["WALCTL_ETCD_ENDPOINTS"] = strings.Join(g.EtcdEndpoints, ",")
	env["WALCTL_ETCD_PREFIX"] = g.EtcdPrefix
	env["WALCTL_WAL"] = g.WAL
	env["WALCTL_LANCE_ROOT"] = g.LanceRoot
	if g.LanceLocation.IsS3() {
		addS3Env(c, env)
	}
	rc, err := restConfig(c)
	if err != nil {
		return nil, err
	}
	kc := kube.Config{Namespace: c.String(KeyNamespace), Template: tmpl,
		CPU: cpu, Memory: mem, Env: env, CallTimeout: g.CommandTimeout}
	if kc.SecretName = c.String(KeyJobS3Secret); kc.SecretName != "" {
		kc.SecretEnv = kube.S3SecretEnv
	}
	return kube.NewRunnerForConfig(rc, kc, f.Logger)
}

// addS3Env passes the S3 settings an executor needs for tables on S3:
// endpoint, region, addressing and the unsafe-store override, as the
// settings' own WALCTL_ variables. Keys are not among them: they reach the
// executor only from the Secret named by master.job_s3_secret.
func addS3Env(c *cmdutil.Config, env map[string]string) {
	for _, k := range []string{cmdutil.KeyS3Endpoint, cmdutil.KeyS3Region, cmdutil.KeyS3PathStyle} {
		if s, ok := cmdutil.LookupSetting(k); ok && c.String(k) != "" {
			env[s.Env()] = c.String(k)
		}
	}
	if s, ok := cmdutil.LookupSetting(cmdutil.KeyS3AllowUnsafe); ok && c.Bool(cmdutil.KeyS3AllowUnsafe) {
		env[s.Env()] = "true"
	}
}

// validateKube checks the Kubernetes runner's settings before anything
// is started.
func validateKube(c *cmdutil.Config) error {
	if c.String(KeyNamespace) == "" || c.String(KeyJobTemplate) == "" {
		return cmdutil.FlagErrorf("master.runner kubernetes needs master.namespace and master.job_template")
	}
	if c.Global.Embedded || c.Global.WAL == "" {
		return cmdutil.FlagErrorf("master.runner kubernetes needs a shared etcd (--etcd-endpoints) and WAL server (--wal): Jobs cannot reach an embedded one")
	}
	return nil
}

func restConfig(c *cmdutil.Config) (*rest.Config, error) {
	if api := c.String(KeyKubeAPI); api != "" {
		return &rest.Config{Host: api, BearerTokenFile: c.String(KeyKubeTokenFile),
			TLSClientConfig: rest.TLSClientConfig{CAFile: c.String(KeyKubeCAFile)}}, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, cmdutil.FlagErrorf("kubernetes runner: not in a cluster and no master.kube_api: %v", err)
	}
	return rc, nil
}
