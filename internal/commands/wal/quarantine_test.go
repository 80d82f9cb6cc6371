package wal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
	corewal "github.com/walctl/walctl/internal/core/wal"
)

// quarantineSetup opens a real WAL engine with table t: one sealed
// generation (first position 1) on shard 0.
func quarantineSetup(t *testing.T) (*corewal.Engine, string) {
	t.Helper()
	dir := t.TempDir()
	eng, err := corewal.Open(dir, corewal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ctx := context.Background()
	if _, err := eng.CreateTable(ctx, "t", schema, 1); err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	defer rec.Release()
	col.Release()
	if _, err := eng.Append(ctx, "t", 0, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Seal(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	return eng, dir
}

func quarantineOpts(dir string, printed *any) *QuarantineOptions {
	return &QuarantineOptions{deps: fakeDeps(nil, printed), WALDir: dir, JSON: func() bool { return false },
		Table: "t", Shard: 0, Generation: 1, Reason: "test"}
}

// A generation that verifies is refused without --force (exit 4) and moved
// aside with it: the audit record is written, the output names the
// directory and the next steps go to stderr.
func TestQuarantineRun(t *testing.T) {
	eng, dir := quarantineSetup(t)
	var printed any
	opts := quarantineOpts(dir, &printed)
	opts.WAL = func(context.Context) (corewal.Log, error) { return eng, nil }
	if err := quarantineRun(context.Background(), opts); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("without --force: %v, want ErrConflict", err)
	}
	opts.Force = true
	if err := quarantineRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	out, ok := printed.(QuarantineOutput)
	if !ok || out.Table != "t" || out.First != 1 || out.Last != 1 || out.Dir == "" {
		t.Fatalf("printed %+v", printed)
	}
	if _, err := os.Stat(filepath.Join(out.Dir, "AUDIT.json")); err != nil {
		t.Fatalf("no audit record: %v", err)
	}
	if stderr := opts.ErrOut.(*bytes.Buffer).String(); !strings.Contains(stderr, out.Dir) || !strings.Contains(stderr, "never skips records") {
		t.Fatalf("stderr %q", stderr)
	}
}

// Through a WAL server (anything but the in-process engine) the verb
// refuses: it must not race the server's appends (exit 4).
func TestQuarantineRunServed(t *testing.T) {
	var printed any
	opts := quarantineOpts("/var/lib/walctl/wal", &printed)
	opts.WAL = func(context.Context) (corewal.Log, error) { return &fakeWAL{shards: 1}, nil }
	err := quarantineRun(context.Background(), opts)
	if !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "/var/lib/walctl/wal") || printed != nil {
		t.Fatalf("err %v, printed %+v", err, printed)
	}
}
