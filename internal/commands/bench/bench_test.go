package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/replbench"
	"github.com/walctl/walctl/internal/core/wal/walbench"
	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

// bench wal measures each producer count beside dd in a scratch dir and
// prints one row per run.
func TestWALRun(t *testing.T) {
	var printed any
	opts := &WALOptions{out: out{ErrOut: io.Discard, Print: func(v any, _ func() *render.Table) error { printed = v; return nil }},
		Config: walbench.Config{Dir: t.TempDir(), Producers: []int{1}, EntryBytes: 64 << 10, BytesPerRun: 1 << 20, DDMiB: 1}}
	if err := walRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	res, ok := printed.(walbench.Result)
	if !ok || len(res.Runs) != 1 || res.Runs[0].Producers != 1 || res.Runs[0].MiBps <= 0 {
		t.Fatalf("%+v", printed)
	}
	if err := res.Runs[0].Load.Check(res.Runs[0].Seconds); err != nil {
		t.Error(err)
	}
}

// bench wal --replicas 3 runs a real group of wal serve processes: once
// caught up, every replica has written at least each ACKed byte, and the
// single-directory engine is measured in the same run. With --cpuprofile
// each replica leaves a CPU profile of its run.
func TestWALRunReplicated(t *testing.T) {
	var printed any
	profile := filepath.Join(t.TempDir(), "replica.pprof")
	opts := &WALOptions{out: out{ErrOut: io.Discard, Print: func(v any, _ func() *render.Table) error { printed = v; return nil }},
		Config:   walbench.Config{Dir: t.TempDir(), Producers: []int{4}, EntryBytes: 256 << 10, BytesPerRun: 8 << 20, DDMiB: 1},
		Replicas: 3, Exe: walctlBin, CPUProfile: profile}
	if err := walRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	res, ok := printed.(replbench.Result)
	if !ok || len(res.Runs) != 2 || res.Runs[0].Mode != "single-directory" || res.Runs[1].Mode != "replicated" {
		t.Fatalf("%+v", printed)
	}
	r := res.Runs[1]
	if r.MiBps <= 0 || len(r.WriteAmp) != 3 || r.DiskEfficiency <= 0 {
		t.Fatalf("replicated run %+v", r)
	}
	if err := r.Load.Check(r.Seconds); err != nil {
		t.Error(err)
	}
	for i, a := range r.WriteAmp {
		if a < 0.9 {
			t.Errorf("replica %d wrote %.2f bytes per ACKed byte: less than the data it holds", i, a)
		}
	}
	for i := range 3 {
		p := fmt.Sprintf("%s.p4.r%d", profile, i)
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("replica %d's CPU profile %s: %v", i, p, err)
		}
	}
	t.Logf("replicated: %.1f MiB/s, write amplification %v, disk efficiency %.2f", r.MiBps, r.WriteAmp, r.DiskEfficiency)
}

var walctlBin string

func TestMain(m *testing.M) { walctlbin.Main(m, &walctlBin) }

// --cpuprofile profiles the replicas, so it is refused without --replicas.
func TestBenchWALFlags(t *testing.T) {
	o, _, err := cmdtest.Parse(t, NewCmdWAL, []string{"--replicas", "3", "--cpuprofile", "/tmp/r.pprof"})
	if err != nil || o.Replicas != 3 || o.CPUProfile != "/tmp/r.pprof" || o.Exe == "" {
		t.Fatalf("flags: %+v %v", o, err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdWAL, []string{"--cpuprofile", "/tmp/r.pprof"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("--cpuprofile without --replicas: %v, want a flag error", err)
	}
}
