package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

type fakeLog struct {
	wal.Log
	err     error
	trimmed uint64
}

func (l *fakeLog) Tables(context.Context) ([]wal.TableInfo, error) {
	return []wal.TableInfo{{Name: "a"}}, l.err
}

func (l *fakeLog) Stats(_ context.Context, table string, wm map[int]uint64) (wal.TableStats, error) {
	return wal.TableStats{Table: table, Shards: []wal.ShardStats{{Shard: 0, Watermark: wm[0], TrimmedThrough: l.trimmed, WatermarkBehindTrim: wm[0] < l.trimmed}}}, nil
}

func TestWAL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	open := func(l wal.Log, err error) func(context.Context) (wal.Log, error) {
		return func(context.Context) (wal.Log, error) { return l, err }
	}
	c, log, tables := WAL(ctx, "x", open(&fakeLog{}, nil))
	if c.Status != OK || log == nil || len(tables) != 1 || c.Detail != "1 table(s)" {
		t.Fatalf("%+v", c)
	}
	c, log, _ = WAL(ctx, "x", open(&fakeLog{err: errors.New("connection refused")}, nil))
	if c.Status != Fail || log != nil || !errors.Is(c.Err, errs.ErrUnavailable) || !strings.Contains(c.Err.Error(), "WAL x did not answer within") {
		t.Fatalf("%+v", c)
	}
	c, _, _ = WAL(ctx, "x", open(nil, errors.New("refused")))
	if c.Status != Fail || !errors.Is(c.Err, errs.ErrUnavailable) {
		t.Fatalf("%+v", c)
	}
}

func TestWatermarks(t *testing.T) {
	log := &fakeLog{trimmed: 5}
	tables := []wal.TableInfo{{Name: "a"}}
	cs := Watermarks(context.Background(), log, tables, func(string) (map[int]uint64, error) { return map[int]uint64{0: 5}, nil })
	if len(cs) != 1 || cs[0].Status != OK {
		t.Fatalf("%+v", cs)
	}
	cs = Watermarks(context.Background(), log, tables, func(string) (map[int]uint64, error) { return map[int]uint64{0: 4}, nil })
	if cs[0].Status != Fail || !errors.Is(cs[0].Err, errs.ErrCorrupt) || !strings.Contains(cs[0].Err.Error(), "shard 0: published through 4, trimmed through 5") {
		t.Fatalf("%+v", cs)
	}
	cs = Watermarks(context.Background(), log, tables, func(string) (map[int]uint64, error) { return nil, errs.ErrCorrupt })
	if cs[0].Status != Fail || !errors.Is(cs[0].Err, errs.ErrCorrupt) {
		t.Fatalf("%+v", cs)
	}
}
