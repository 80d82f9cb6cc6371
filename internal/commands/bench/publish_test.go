package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/pubbench"
	"github.com/walctl/walctl/internal/core/publish"
)

func parsePublish(t *testing.T, args []string) (*PublishOptions, error) {
	t.Helper()
	o, _, err := cmdtest.Parse(t, NewCmdPublish, args)
	return o, err
}

func TestBenchPublishFlags(t *testing.T) {
	o, err := parsePublish(t, nil)
	if err != nil || o.Size != 1<<30 || o.Budget != 256<<20 || len(o.Modes) != 2 || o.Modes[0] != "buffered" || o.DDMiB != 512 {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	o, err = parsePublish(t, []string{"--size", "8MiB", "--budget", "64MiB", "--modes", "streamed", "--dd-mib", "16", "--keep"})
	if err != nil || o.Size != 8<<20 || o.Budget != 64<<20 || len(o.Modes) != 1 || o.Modes[0] != "streamed" || o.DDMiB != 16 || !o.Keep {
		t.Fatalf("flags: %+v %v", o, err)
	}
	for _, bad := range [][]string{{"--modes", "fast"}, {"--size", "0"}, {"--dd-mib", "0"}} {
		if _, err := parsePublish(t, bad); !cmdutil.IsFlagError(err) {
			t.Fatalf("%v: %v, want a flag error", bad, err)
		}
	}
	if _, err := parsePublish(t, []string{"--size", "lots"}); err == nil || (!errors.Is(err, errs.ErrInvalid) && !cmdutil.IsFlagError(err)) {
		t.Fatalf("--size lots: %v", err)
	}
}

// The measured child stops at the first dependency that fails.
func TestChildRunPublisherError(t *testing.T) {
	down := errors.New("etcd down")
	opts := &PublishOptions{ErrOut: io.Discard, Owner: func(string) coord.Owner { return coord.Owner{} },
		Publisher: func(context.Context, coord.Owner, ...coord.AcquireOption) (*publish.Publisher, error) {
			return nil, down
		}}
	if err := childRun(context.Background(), opts); !errors.Is(err, down) {
		t.Fatalf("err = %v", err)
	}
}

// fakeChild writes an executable standing in for the measured walctl
// child: it records its arguments and environment in dir and prints one
// mode's result.
func fakeChild(t *testing.T, dir string) string {
	t.Helper()
	exe := filepath.Join(dir, "walctl")
	script := "#!/bin/sh\n" +
		"echo \"$@\" > \"" + dir + "/args\"\n" +
		"env > \"" + dir + "/env-$WALCTL_WORKER_PUBLICATION_PIPELINE_PREPARATION\"\n" +
		"echo '{\"bytes\": 1048576, \"rows\": 10, \"files\": 2, \"rounds\": 1, \"seconds\": 0.5, \"mib_per_s\": 2}'\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// bench publish builds a real backlog per mode in a scratch directory,
// runs the child with the mode's preparation and budget in its
// environment, prints one run per mode and removes the scratch directory.
func TestPublishRun(t *testing.T) {
	scratch, bin := t.TempDir(), t.TempDir()
	var printed any
	opts := &PublishOptions{ErrOut: io.Discard, Dir: scratch, Size: 256 << 10, Budget: 64 << 20, Modes: []string{"buffered", "streamed"}, DDMiB: 1,
		Exe:   func() (string, error) { return fakeChild(t, bin), nil },
		Print: func(v any, _ func() *render.Table) error { printed = v; return nil }}
	if err := publishRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	res, ok := printed.(pubbench.Result)
	if !ok || len(res.Runs) != 2 || res.Runs[0].Mode != "buffered" || res.Runs[1].Mode != "streamed" || res.Runs[0].Bytes != 1<<20 || len(res.Backlog) != 2 {
		t.Fatalf("printed %+v", printed)
	}
	for _, r := range res.Runs {
		if r.DDSameSize == nil || r.DDSameSize.MiB != 1 || r.RatioToDDSameSize <= 0 {
			t.Fatalf("%s: no same-size dd of its 1 MiB publication: %+v", r.Mode, r)
		}
	}
	for _, bl := range res.Backlog {
		if bl.Bytes < 256<<10 {
			t.Fatalf("backlog %+v smaller than --size", bl)
		}
	}
	args, err := os.ReadFile(filepath.Join(bin, "args"))
	if err != nil || !strings.HasPrefix(string(args), "bench publish --child") {
		t.Fatalf("child args %q %v", args, err)
	}
	for mode, streamed := range map[string]string{"buffered": "false", "streamed": "true"} {
		env, err := os.ReadFile(filepath.Join(bin, "env-"+streamed))
		if err != nil {
			t.Fatalf("%s: the child did not run with its preparation mode: %v", mode, err)
		}
		if !strings.Contains(string(env), "WALCTL_WORKER_MEMORY_BUDGET=67108864") || !strings.Contains(string(env), "WALCTL_DATA_DIR="+scratch) {
			t.Fatalf("%s: child environment lacks the budget or scratch data dir:\n%s", mode, env)
		}
	}
	if left, err := os.ReadDir(scratch); err != nil || len(left) != 0 {
		t.Fatalf("scratch left behind: %v %v", left, err)
	}
}
