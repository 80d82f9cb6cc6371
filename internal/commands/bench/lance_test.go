package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancebench"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

// bench lance writes a tiny table through both walctl formats and the
// official writer (the real oracle) between two dd runs, prints one result
// with each walctl writer's ratio to dd, writes the CPU profile asked for,
// and leaves no scratch directory behind.
func TestLanceRun(t *testing.T) {
	o := oracletest.MustFind(t)
	var printed any
	var table *render.Table
	dir := t.TempDir()
	profile := filepath.Join(t.TempDir(), "lance.pprof")
	opts := &LanceOptions{Dir: dir, OracleDir: o.Dir, CPUProfile: profile, Config: lancebench.Config{Adds: 1, BatchesPerAdd: 1, RowsPerBatch: 50, DDMiB: 4},
		out: out{ErrOut: io.Discard, Print: func(v any, tf func() *render.Table) error { printed, table = v, tf(); return nil }}}
	if err := lanceRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	res, ok := printed.(*lancebench.Result)
	if !ok {
		t.Fatalf("printed %T, want *lancebench.Result", printed)
	}
	for _, s := range []lancebench.Side{res.Walctl, res.Walctl21, res.Official} {
		if s.Rows != 50 || s.DataBytes <= 0 {
			t.Fatalf("result %+v", res)
		}
	}
	if len(res.DD) != 2 || res.DDMiBps <= 0 || res.Walctl.RatioToDD <= 0 || res.Walctl21.RatioToDD <= 0 || res.Official.RatioToDD != 0 {
		t.Fatalf("dd runs %+v, %.1f MiB/s; ratios to dd %.3f, %.3f, official %.3f", res.DD, res.DDMiBps,
			res.Walctl.RatioToDD, res.Walctl21.RatioToDD, res.Official.RatioToDD)
	}
	if table == nil {
		t.Fatal("no table renderer")
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("scratch left behind: %v %v", left, err)
	}
	if st, err := os.Stat(profile); err != nil || st.Size() == 0 {
		t.Fatalf("CPU profile %s: %v", profile, err)
	}
}

// Without the official package the bench fails before writing anything,
// naming what is missing (exit 5).
func TestLanceRunNoOracle(t *testing.T) {
	dir := t.TempDir()
	opts := &LanceOptions{Dir: dir, OracleDir: t.TempDir(), Config: lancebench.Config{Adds: 1, BatchesPerAdd: 1, RowsPerBatch: 1},
		out: out{ErrOut: io.Discard, Print: func(any, func() *render.Table) error { t.Fatal("printed a result"); return nil }}}
	err := lanceRun(context.Background(), opts)
	if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), opts.OracleDir) {
		t.Fatalf("err = %v, want ErrUnavailable naming %s", err, opts.OracleDir)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("wrote before finding the oracle: %v %v", left, err)
	}
}
