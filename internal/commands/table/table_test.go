package table

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walflight"
)

// fakeWAL implements the wal.Log calls the table verbs make.
type fakeWAL struct {
	wal.Log
	tables  map[string]wal.TableInfo
	created []string
}

func (w *fakeWAL) CreateTable(_ context.Context, name string, schema *arrow.Schema, shards int) (wal.TableInfo, error) {
	w.created = append(w.created, name)
	return wal.TableInfo{Name: name, Schema: schema, Shards: shards}, nil
}

func (w *fakeWAL) Table(_ context.Context, name string) (wal.TableInfo, error) {
	if i, ok := w.tables[name]; ok {
		return i, nil
	}
	return wal.TableInfo{}, wal.ErrUnknownTable
}

func (w *fakeWAL) Tables(context.Context) ([]wal.TableInfo, error) {
	out := []wal.TableInfo{}
	for _, i := range w.tables {
		out = append(out, i)
	}
	return out, nil
}

func fakeDeps(w *fakeWAL, printed *any) deps {
	return deps{
		WAL: func(context.Context) (wal.Log, error) { return w, nil },
		CallContext: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Minute)
		},
		Print:  func(v any, _ func() *render.Table) error { *printed = v; return nil },
		ErrOut: &bytes.Buffer{},
	}
}

func TestCreateRun(t *testing.T) {
	w := &fakeWAL{}
	var printed any
	opts := &CreateOptions{deps: fakeDeps(w, &printed), Name: "orders", SchemaFile: "s.json", Shards: 2,
		Groups:    func() (walflight.Groups, error) { return nil, nil },
		ReadInput: func(string) ([]byte, error) { return []byte(`[{"name": "id", "type": "int64"}]`), nil }}
	if err := createRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if d := printed.(Description); len(w.created) != 1 || d.Name != "orders" || d.Shards != 2 || d.Fields[0].Type != "int64" {
		t.Fatalf("created %v printed %+v", w.created, d)
	}
	opts.ReadInput = func(string) ([]byte, error) { return []byte(`[{"name": "x", "type": "int128"}]`), nil }
	if err := createRun(context.Background(), opts); !errors.Is(err, errs.ErrInvalid) || len(w.created) != 1 {
		t.Fatalf("bad schema: %v (created %v)", err, w.created)
	}
}

func TestDescribeAndList(t *testing.T) {
	w := &fakeWAL{tables: map[string]wal.TableInfo{"a": {Name: "a", Shards: 3, Schema: arrow.NewSchema(nil, nil)}}}
	var printed any
	d := fakeDeps(w, &printed)
	if err := describeRun(context.Background(), &DescribeOptions{deps: d, Name: "nope"}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown table: %v", err)
	}
	if err := listRun(context.Background(), &ListOptions{deps: d, LanceRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if rows := printed.([]Listed); len(rows) != 1 || rows[0].Name != "a" || rows[0].Shards != 3 || rows[0].Version != nil {
		t.Fatalf("list %+v", rows)
	}
}

// A registered table nothing was published into says so (exit 3).
func TestReadUnpublished(t *testing.T) {
	var printed any
	err := readRun(context.Background(), &ReadOptions{deps: fakeDeps(&fakeWAL{}, &printed), LanceRoot: t.TempDir(), Name: "orders"})
	if !errors.Is(err, errs.ErrNotFound) || err.Error() != "table orders has no published version yet" {
		t.Fatalf("err = %v", err)
	}
}

func TestTableFlags(t *testing.T) {
	for _, args := range [][]string{{"--table", "o", "--schema", "s"}, {"o", "--schema", "s"}} {
		if o, _, err := cmdtest.Parse(t, NewCmdCreate, args); err != nil || o.Name != "o" {
			t.Fatalf("%v: %v", args, err)
		}
	}
	if _, _, err := cmdtest.Parse(t, NewCmdRead, nil); !cmdutil.IsFlagError(err) {
		t.Fatalf("read without a table: %v", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdList, []string{"x"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("list with an argument: %v", err)
	}
}

// With WAL groups configured, the table's group is recorded before it is
// registered; an unknown group is refused before anything is written.
func TestCreateRunPlacesTheTable(t *testing.T) {
	w := &fakeWAL{}
	var printed any
	placed := map[string]string{}
	opts := &CreateOptions{deps: fakeDeps(w, &printed), Name: "orders", SchemaFile: "s.json", Shards: 1,
		Groups: func() (walflight.Groups, error) { return walflight.Groups{"g1": {"a:1"}, "g2": {"b:1"}}, nil },
		Place: func(_ context.Context, table, group string) error {
			if len(w.created) != 0 {
				t.Errorf("placement recorded after the WAL registration")
			}
			placed[table] = group
			return nil
		},
		ReadInput: func(string) ([]byte, error) { return []byte(`[{"name": "id", "type": "int64"}]`), nil }}
	if err := createRun(context.Background(), opts); !cmdutil.IsFlagError(err) {
		t.Fatalf("no --group with two groups: %v; want a usage error", err)
	}
	opts.Group = "g3"
	if err := createRun(context.Background(), opts); !errors.Is(err, walflight.ErrUnknownGroup) || len(placed)+len(w.created) != 0 {
		t.Fatalf("unknown group: %v (placed %v, created %v)", err, placed, w.created)
	}
	opts.Group = "g2"
	if err := createRun(context.Background(), opts); err != nil || placed["orders"] != "g2" || len(w.created) != 1 {
		t.Fatalf("create in g2: %v (placed %v, created %v)", err, placed, w.created)
	}
}
