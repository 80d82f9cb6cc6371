package bench

import (
	"context"
	"io"
	"testing"

	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/wal/walbench"
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
	if res, ok := printed.(walbench.Result); !ok || len(res.Runs) != 1 || res.Runs[0].Producers != 1 || res.Runs[0].MiBps <= 0 {
		t.Fatalf("%+v", printed)
	}
}
