package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/errs"
)

// decodeFixture reads the one batch of an Arrow IPC stream.
func decodeFixture(t *testing.T, stream []byte) arrow.RecordBatch {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("no batch: %v", r.Err())
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMalformedBatchesNotACKed: rule 17 at the engine. Every bad stream of
// the fixture set that arrow-go decodes is refused by Append with an
// ErrInvalid naming its column and row; the shard's positions, stats and
// files are unchanged; a valid batch then takes the next position.
func TestMalformedBatchesNotACKed(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	ctx := context.Background()
	if _, err := e.CreateTable(ctx, "fx", arrowchecktest.Schema(), 1); err != nil {
		t.Fatal(err)
	}
	valid := decodeFixture(t, arrowchecktest.Valid())
	defer valid.Release()
	if pos, err := e.Append(ctx, "fx", 0, valid); err != nil || pos != 1 {
		t.Fatalf("valid batch: %d %v", pos, err)
	}
	before, err := e.Stats(ctx, "fx", nil)
	if err != nil {
		t.Fatal(err)
	}
	tableDir := filepath.Join(dir, "tables", "fx")
	size := dirBytes(t, tableDir)
	for _, c := range arrowchecktest.Cases() {
		if c.Decoder {
			continue // arrow-go refuses it before any batch exists
		}
		t.Run(c.Rule, func(t *testing.T) {
			rec := decodeFixture(t, c.Stream)
			defer rec.Release()
			pos, err := e.Append(ctx, "fx", 0, rec)
			if err == nil {
				t.Fatalf("ACKed at position %d", pos)
			}
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.Column)) ||
				(c.Row >= 0 && !strings.Contains(err.Error(), fmt.Sprintf("row %d", c.Row))) {
				t.Fatalf("got %v, want ErrInvalid naming column %q row %d", err, c.Column, c.Row)
			}
			after, err := e.Stats(ctx, "fx", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("stats changed by a refused append:\n%+v\n%+v", before, after)
			}
			if got := dirBytes(t, tableDir); got != size {
				t.Fatalf("table files grew from %d to %d bytes", size, got)
			}
		})
	}
	if pos, err := e.Append(ctx, "fx", 0, valid); err != nil || pos != 2 {
		t.Fatalf("valid batch after the refusals: %d %v", pos, err)
	}
}

// TestCreateTableRefusesCaseTwins: "ORDERS" beside "orders" would be one
// directory on a case-insensitive file system (darwin builds ship); the
// refusal names the existing table and creates nothing.
func TestCreateTableRefusesCaseTwins(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	ctx := context.Background()
	mustCreate(t, e, "orders", 1)
	_, err := e.CreateTable(ctx, "ORDERS", testSchema, 1)
	if !errors.Is(err, ErrTableConflict) || !strings.Contains(err.Error(), `table "orders" exists`) {
		t.Fatalf("got %v, want ErrTableConflict naming \"orders\"", err)
	}
	if _, err := e.Table(ctx, "ORDERS"); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("ORDERS after a refused create: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "tables", "ORDERS*")); len(m) != 0 {
		t.Fatalf("refused create left %v", m)
	}
}

// TestCreateTableChecksSchema: the engine refuses a schema arrowcheck
// refuses, whichever client sent it.
func TestCreateTableChecksSchema(t *testing.T) {
	e := openTest(t, t.TempDir(), Options{})
	s := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int8}, {Name: "X", Type: arrow.PrimitiveTypes.Int8}}, nil)
	_, err := e.CreateTable(context.Background(), "t", s, 1)
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `"x" and "X" differ only in case`) {
		t.Fatalf("got %v", err)
	}
}
