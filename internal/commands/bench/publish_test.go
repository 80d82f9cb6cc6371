package bench

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
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
