package quickstart

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Every "try next" command carries the data dir it needs, quoted for a
// shell when it must be.
func TestNextStepsCarryTheDataDir(t *testing.T) {
	for _, dir := range []string{"/tmp/demo", "/tmp/my demo"} {
		for _, s := range nextSteps(&Options{Table: "q", DataDir: dir}) {
			if !strings.Contains(s, "--data-dir "+shellQuote(dir)) {
				t.Fatalf("%q lacks the data dir %q", s, dir)
			}
		}
	}
	for _, s := range nextSteps(&Options{Table: "q", DataDir: "/d", LanceRoot: "s3://lake/t"}) {
		if !strings.Contains(s, "--data-dir /d --lance-root s3://lake/t") {
			t.Fatalf("%q lacks the bucket lance root", s)
		}
	}
	for _, s := range nextSteps(&Options{Table: "q", DataDir: "/d", LanceRoot: "/d/tables"}) {
		if strings.Contains(s, "--lance-root") {
			t.Fatalf("%q names the default lance root", s)
		}
	}
	if shellQuote("/tmp/my demo") != "'/tmp/my demo'" || shellQuote("/a/b") != "/a/b" {
		t.Fatal(shellQuote("/tmp/my demo"))
	}
}

// quickstartRun stops at the first failing step with its error, saying
// nothing more.
func TestQuickstartRunStopsOnWALError(t *testing.T) {
	var say bytes.Buffer
	down := errors.New("wal down")
	opts := &Options{Table: "q", Shards: 1, Records: 1, BatchRows: 1, Say: &say,
		Coord: func(context.Context) (*coord.Client, error) { return nil, nil },
		WAL:   func(context.Context) (wal.Log, error) { return nil, down }}
	if err := quickstartRun(context.Background(), opts); !errors.Is(err, down) || strings.Contains(say.String(), "1/4") {
		t.Fatalf("%v %q", err, say.String())
	}
}

func TestQuickstartFlags(t *testing.T) {
	o, _, err := cmdtest.Parse(t, NewCmdQuickstart, []string{"--records", "10", "--memory-budget", "64MiB"})
	if err != nil || o.Records != 10 || o.Say == nil || !strings.HasSuffix(o.Where, "/wal") {
		t.Fatalf("%+v %v", o, err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdQuickstart, []string{"--records", "0"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("no records: %v", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdQuickstart, []string{"--memory-budget", "lots"}); !errors.Is(err, errs.ErrInvalid) && !cmdutil.IsFlagError(err) {
		t.Fatalf("bad budget: %v", err)
	}
}
