package wal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
	corewal "github.com/walctl/walctl/internal/core/wal"
)

var schema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

// fakeWAL implements the wal.Log calls the wal verbs make.
type fakeWAL struct {
	corewal.Log
	shards    int
	appended  int
	sealed    []int
	watermark map[int]uint64
	appendErr error
}

func (w *fakeWAL) Table(_ context.Context, name string) (corewal.TableInfo, error) {
	if name != "t" {
		return corewal.TableInfo{}, corewal.ErrUnknownTable
	}
	return corewal.TableInfo{Name: "t", Schema: schema, Shards: w.shards}, nil
}

func (w *fakeWAL) Tables(context.Context) ([]corewal.TableInfo, error) {
	return []corewal.TableInfo{{Name: "t", Schema: schema, Shards: w.shards}}, nil
}

func (w *fakeWAL) Append(_ context.Context, _ string, _ int, _ arrow.RecordBatch) (uint64, error) {
	if w.appendErr != nil {
		return 0, w.appendErr
	}
	w.appended++
	return uint64(w.appended), nil
}

func (w *fakeWAL) Seal(_ context.Context, _ string, shard int) (corewal.Generation, error) {
	w.sealed = append(w.sealed, shard)
	return corewal.Generation{ID: 1, First: 1, Last: 2, Entries: 2}, nil
}

func (w *fakeWAL) Stats(_ context.Context, table string, wm map[int]uint64) (corewal.TableStats, error) {
	w.watermark = wm
	return corewal.TableStats{Table: table, Shards: []corewal.ShardStats{{Shard: 0, Watermark: wm[0]}}}, nil
}

func fakeDeps(w *fakeWAL, printed *any) deps {
	return deps{
		WAL:      func(context.Context) (corewal.Log, error) { return w, nil },
		Print:    func(v any, _ func() *render.Table) error { *printed = v; return nil },
		Progress: func() *progress.Reporter { return progress.New(io.Discard, false, true, nil) },
		Now:      time.Now,
		ErrOut:   &bytes.Buffer{},
		Timeout:  time.Minute,
	}
}

func TestAppendRun(t *testing.T) {
	w := &fakeWAL{shards: 2}
	var printed any
	opts := &AppendOptions{deps: fakeDeps(w, &printed), Table: "t", Shard: 1, File: "in", Format: "jsonl", BatchRows: 2,
		ReadInput: func(string) ([]byte, error) { return []byte("{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3}\n"), nil }}
	if err := appendRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if r := printed.(AppendResult); len(r.Entries) != 2 || r.Rows != 3 || w.appended != 2 {
		t.Fatalf("result %+v", r)
	}
	opts.Shard = 2
	if err := appendRun(context.Background(), opts); !errors.Is(err, errs.ErrInvalid) || w.appended != 2 {
		t.Fatalf("shard out of range: %v", err)
	}
}

func TestSealRun(t *testing.T) {
	w := &fakeWAL{shards: 3}
	var printed any
	if err := sealRun(context.Background(), &SealOptions{deps: fakeDeps(w, &printed), Table: "t", Shard: -1}); err != nil {
		t.Fatal(err)
	}
	if len(w.sealed) != 3 || len(printed.([]SealedShard)) != 3 {
		t.Fatalf("sealed %v", w.sealed)
	}
}

// wal stats passes the table's published watermarks, so a trimmed table
// is not reported behind its trim point.
func TestStatsRunPassesWatermarks(t *testing.T) {
	w := &fakeWAL{shards: 1}
	var printed any
	opts := &StatsOptions{deps: fakeDeps(w, &printed),
		Watermarks: func(string) (publish.Watermarks, error) { return publish.Watermarks{0: 42}, nil }}
	if err := statsRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if w.watermark[0] != 42 || printed.([]corewal.TableStats)[0].Shards[0].Watermark != 42 {
		t.Fatalf("watermarks passed %v", w.watermark)
	}
}

func TestLoadRun(t *testing.T) {
	w := &fakeWAL{shards: 2}
	var printed any
	opts := &LoadOptions{deps: fakeDeps(w, &printed), Table: "t", BatchRows: 10, Bytes: 400, Producers: 2, FirstID: 1, IDSpan: 100, Retries: 1}
	if err := loadRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	r := printed.(LoadResult)
	if !r.OK || len(r.Producers) != 2 || r.Producers[1].FirstID != 101 || r.Entries == 0 || r.NextID < 101 {
		t.Fatalf("result %+v", r)
	}
	// A failing WAL: the summary is printed and the error returned.
	w.appendErr = corewal.ErrUnknownTable
	printed = nil
	if err := loadRun(context.Background(), opts); !errors.Is(err, errs.ErrNotFound) || printed == nil || printed.(LoadResult).OK {
		t.Fatalf("failure: %v %+v", err, printed)
	}
}

func TestFlags(t *testing.T) {
	if _, _, err := cmdtest.Parse(t, NewCmdLoad, []string{"--table", "t"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("load without a limit: %v", err)
	}
	o, _, err := cmdtest.Parse(t, NewCmdLoad, []string{"--table", "t", "--bytes", "1MiB", "--retries", "5", "--id-span", "4096"})
	if err != nil || o.Bytes != 1<<20 || o.Retries != 5 || o.IDSpan != 4096 {
		t.Fatalf("%+v %v", o, err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdAppend, []string{"--table", "t", "--format", "csv", "x"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("bad format: %v", err)
	}
	if o, _, err := cmdtest.Parse(t, NewCmdSeal, []string{"--table", "t"}); err != nil || o.Shard != -1 {
		t.Fatalf("seal every shard: %+v %v", o, err)
	}
	if o, _, err := cmdtest.Parse(t, NewCmdServe, []string{"--dir", "d", "--wal-generation-bytes", "16MiB"}); err != nil || o.AddrFile != "d/ENDPOINT" || o.Engine.MaxGenerationBytes != 16<<20 {
		t.Fatalf("serve: %+v %v", o, err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdServe, []string{"--tls-cert", "c"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("tls cert alone: %v", err)
	}
}
