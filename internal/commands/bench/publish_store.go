package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/dustin/go-humanize"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/pubbench"
)

// s3Bench is a publication benchmark whose tables live on the configured
// S3 root: the run gets the prefix walctl-bench/<run>/ there, each mode's
// child publishes under <mode>/, and the raw PutObject baseline puts the
// same bytes under raw-<mode>/ (deleted after).
type s3Bench struct {
	root  string         // s3://bucket/prefix/walctl-bench/<run>
	env   []string       // the S3 settings, for the children
	store objstore.Store // the run's prefix
}

// newS3Bench returns nil on a local lance root. It probes the store first,
// so an unsafe or unreachable store fails before any backlog is built.
func newS3Bench(ctx context.Context, f *cmdutil.Factory, run string) (*s3Bench, error) {
	g := f.Global()
	if !g.LanceLocation.IsS3() {
		return nil, nil
	}
	if err := f.ProbeLanceStore(ctx); err != nil {
		return nil, err
	}
	st, err := f.LanceStore(ctx)
	if err != nil {
		return nil, err
	}
	o, err := f.S3Options()
	if err != nil {
		return nil, err
	}
	// Children get the settings as resolved here (flags and config file
	// included); keys travel in their environment, never argv.
	env := []string{"WALCTL_S3_PATH_STYLE=" + strconv.FormatBool(o.PathStyle),
		"WALCTL_S3_ALLOW_UNSAFE_STORE=" + strconv.FormatBool(f.Config.Bool(cmdutil.KeyS3AllowUnsafe))}
	for k, v := range map[string]string{cmdutil.KeyS3Endpoint: o.Endpoint, cmdutil.KeyS3Region: o.Region,
		cmdutil.KeyS3AccessKey: o.AccessKey, cmdutil.KeyS3SecretKey: o.SecretKey} {
		if s, ok := cmdutil.LookupSetting(k); ok && v != "" {
			env = append(env, s.Env()+"="+v)
		}
	}
	prefix := "walctl-bench/" + run
	return &s3Bench{root: g.LanceRoot + "/" + prefix, env: env, store: st.Sub(prefix)}, nil
}

// childEnv is the environment of mode's measured child.
func childEnv(opts *PublishOptions, s3b *s3Bench, mode, dir string) []string {
	env := append(os.Environ(),
		"WALCTL_DATA_DIR="+dir, "WALCTL_EMBEDDED=true", "WALCTL_WAL=", "WALCTL_LANCE_ROOT=",
		"WALCTL_WORKER_MEMORY_BUDGET="+strconv.FormatInt(opts.Budget, 10),
		"WALCTL_WORKER_PUBLICATION_PIPELINE_PREPARATION="+strconv.FormatBool(mode == "streamed"))
	if s3b != nil { // the last of duplicate keys wins
		env = append(append(env, s3b.env...), "WALCTL_LANCE_ROOT="+s3b.root+"/"+mode)
	}
	return env
}

// publishTable renders the result; on S3 with the raw PutObject baseline.
func publishTable(res pubbench.Result, s3 bool) *render.Table {
	cols := []string{"mode", "MiB", "MiB/s", "peak RSS", "budget", "dd MiB/s", "ratio to dd", "CPUs busy", "files", "rows"}
	if s3 {
		cols = append(cols, "raw put MiB/s", "ratio to raw put")
	} else {
		cols = append(cols, "same-size dd MiB/s", "ratio to it")
	}
	t := render.NewTable(cols...)
	for _, r := range res.Runs {
		row := []string{r.Mode, fmt.Sprintf("%.0f", float64(r.Bytes)/(1<<20)), fmt.Sprintf("%.1f", r.MiBps), fmt.Sprintf("%.0f MiB", r.PeakRSSMiB),
			humanize.IBytes(uint64(res.Budget)), fmt.Sprintf("%.1f", r.DDMiBps), fmt.Sprintf("%.2f", r.RatioToDD), r.Load.Text(), fmt.Sprint(r.Files), humanize.Comma(r.Rows)}
		switch {
		case s3 && r.Put != nil:
			row = append(row, fmt.Sprintf("%.1f", r.Put.MiBps), fmt.Sprintf("%.2f", r.RatioToPut))
		case !s3 && r.DDSameSize != nil:
			row = append(row, fmt.Sprintf("%.1f", r.DDSameSize.MiBps), fmt.Sprintf("%.2f", r.RatioToDDSameSize))
		}
		t.Add(row...)
	}
	return t
}
