package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// WAL checks that the WAL answers within ctx's deadline: it is opened (or
// dialled) with open and asked for its tables. The log is returned for
// further checks when it answered, nil otherwise. A WAL that does not answer
// fails with an error wrapping errs.ErrUnavailable.
func WAL(ctx context.Context, target string, open func(context.Context) (wal.Log, error)) (Check, wal.Log, []wal.TableInfo) {
	c := Check{Name: "wal", Target: target}
	start := time.Now()
	hint := "check --wal (WALCTL_WAL), that the WAL server runs and the token, or the data dir of the in-process WAL"
	log, err := open(ctx)
	if err != nil {
		return finish(c, start, unavailable(ctx, start, target, err), hint), nil, nil
	}
	tables, err := log.Tables(ctx)
	if err != nil {
		return finish(c, start, unavailable(ctx, start, target, err), hint), nil, nil
	}
	c.Detail = fmt.Sprintf("%d table(s)", len(tables))
	return finish(c, start, nil, ""), log, tables
}

func unavailable(ctx context.Context, start time.Time, target string, err error) error {
	within := ""
	if d, ok := ctx.Deadline(); ok {
		within = fmt.Sprintf(" within %s", d.Sub(start).Round(time.Millisecond))
	}
	if ctx.Err() != nil || !categorized(err) {
		err = fmt.Errorf("%v: %w", err, errs.ErrUnavailable)
	}
	return fmt.Errorf("WAL %s did not answer%s: %w", target, within, err)
}

// Watermarks checks, for each table, that no shard's published watermark
// (read with watermarks, from the table's latest Lance version) is behind
// the WAL's trimmed-through position: entries trimmed before they were
// published are lost (DESIGN.md §3 rule 9). Such a table fails with
// errs.ErrCorrupt naming the shards; a table whose statistics or
// watermarks cannot be read fails with that error.
func Watermarks(ctx context.Context, log wal.Log, tables []wal.TableInfo, watermarks func(table string) (map[int]uint64, error)) []Check {
	var out []Check
	for _, t := range tables {
		c := Check{Name: "watermark", Target: t.Name}
		start := time.Now()
		wm, err := watermarks(t.Name)
		if err != nil {
			out = append(out, finish(c, start, err, "the table's latest Lance version cannot be read: run walctl verify --table "+t.Name))
			continue
		}
		st, err := log.Stats(ctx, t.Name, wm)
		if err != nil {
			out = append(out, finish(c, start, err, "the WAL cannot report the table's statistics"))
			continue
		}
		var behind []string
		for _, s := range st.Shards {
			if s.WatermarkBehindTrim {
				behind = append(behind, fmt.Sprintf("shard %d: published through %d, trimmed through %d", s.Shard, s.Watermark, s.TrimmedThrough))
			}
		}
		if len(behind) > 0 {
			err := fmt.Errorf("table %s: the WAL is trimmed beyond the published watermark (%s): %w", t.Name, strings.Join(behind, "; "), errs.ErrCorrupt)
			out = append(out, finish(c, start, err, "entries trimmed before they were published are gone; run walctl verify --table "+t.Name))
			continue
		}
		c.Detail = fmt.Sprintf("published watermark at or above the trimmed point on all %d shard(s)", len(st.Shards))
		out = append(out, finish(c, start, nil, ""))
	}
	return out
}

func categorized(err error) bool {
	for _, c := range []error{errs.ErrInvalid, errs.ErrNotFound, errs.ErrConflict, errs.ErrFenced, errs.ErrUnavailable, errs.ErrCorrupt} {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}
