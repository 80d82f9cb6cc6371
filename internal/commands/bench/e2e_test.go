package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/e2ebench"
	"github.com/walctl/walctl/internal/core/wal"
)

func parseE2E(t *testing.T, args []string) (*E2EOptions, error) {
	t.Helper()
	o, _, err := cmdtest.Parse(t, NewCmdE2E, args)
	return o, err
}

func TestBenchE2EFlags(t *testing.T) {
	o, err := parseE2E(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Duration != 10*time.Minute || c.Rate != 0 || c.RateOfDD != 0.5 || c.DDMiB != 512 || c.EntryBytes != 1<<20 ||
		c.Engine.MaxGenerationAge != wal.DefaultMaxGenerationAge || c.Publish.Owner.ID == "" || c.Worker.PollInterval != time.Second || c.Keep {
		t.Fatalf("defaults: %+v", c)
	}
	o, err = parseE2E(t, []string{"--duration", "2m", "--rate", "200MiB/s", "--wal-generation-age", "2s", "--entry-bytes", "256KiB",
		"--producers", "8", "--shards", "2", "--dd-mib", "64", "--poll-interval", "100ms", "--keep", "--dir", "/scratch", "--cpuprofile", "/tmp/e2e.pprof"})
	if err != nil {
		t.Fatal(err)
	}
	c = o.Config
	if c.Duration != 2*time.Minute || c.Rate != 200<<20 || c.RateOfDD != 0 || c.Engine.MaxGenerationAge != 2*time.Second || c.EntryBytes != 256<<10 ||
		c.Producers != 8 || c.Shards != 2 || c.DDMiB != 64 || c.Worker.PollInterval != 100*time.Millisecond || !c.Keep || o.Dir != "/scratch" || o.CPUProfile != "/tmp/e2e.pprof" {
		t.Fatalf("flags: %+v", c)
	}
	if o, err = parseE2E(t, []string{"--rate", "25%"}); err != nil || o.Config.RateOfDD != 0.25 || o.Config.Rate != 0 {
		t.Fatalf("--rate 25%%: %+v %v", o, err)
	}
	if o, err = parseE2E(t, []string{"--find-max", "25%,50%", "--duration", "1m"}); err != nil || len(o.FindMax) != 2 || o.FindMax[1] != 0.5 {
		t.Fatalf("--find-max: %+v %v", o, err)
	}
	for _, bad := range [][]string{{"--find-max", "100MiB/s"}, {"--find-max", "x"}, {"--rate", "fast"}, {"--rate", "0%"}, {"--rate", "-5%"}, {"--rate", "0"}, {"--duration", "0s"},
		{"--producers", "0"}, {"--wal-generation-age", "0s"}} {
		if _, err := parseE2E(t, bad); !cmdutil.IsFlagError(err) {
			t.Fatalf("%v: %v, want a flag error", bad, err)
		}
	}
}

// The text view: a chart per series (blank where freshness has no value),
// then the summary.
func TestE2ECharts(t *testing.T) {
	res := e2ebench.Result{Samples: []e2ebench.Sample{
		{Second: 1, BacklogMiB: 0},
		{Second: 2, BacklogMiB: 4, Visible: 2, Freshness: e2ebench.Percentiles{Count: 2, Max: 2.5}},
		{Second: 3, BacklogMiB: 8},
	}}
	var b strings.Builder
	if err := e2eCharts(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	fresh, backlog, ok := strings.Cut(out, "backlog")
	if !ok || !strings.Contains(fresh, "freshness") || !strings.Contains(fresh, "2.50") || !strings.Contains(backlog, "8.00") {
		t.Fatalf("charts:\n%s", out)
	}
	// The freshness chart's bottom row: second 1 and 3 have no value (blank),
	// second 2 the full block.
	for _, line := range strings.Split(fresh, "\n") {
		if strings.Contains(line, "0.00 ┤") && !strings.HasSuffix(line, "┤ █ ") {
			t.Fatalf("freshness bottom row %q", line)
		}
	}
	var tb strings.Builder
	if err := render.Plain(&tb, e2eTable(res)); err != nil || !strings.Contains(tb.String(), "freshness") || !strings.Contains(tb.String(), "ratio to dd") {
		t.Fatalf("summary %q %v", tb.String(), err)
	}
}
