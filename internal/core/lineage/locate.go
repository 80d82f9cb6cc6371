package lineage

import (
	"context"
	"fmt"
	"strings"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
)

// Where a WAL entry is.
const (
	// StatusPublished: a version published it; Version and File say where.
	StatusPublished = "published"
	// StatusPending: ACKed and retained in the WAL, above the watermark.
	StatusPending = "not-published"
	// StatusTrimmed: trimmed from the WAL, and no retained version of the
	// table says it published it (a lost version, or cleaned-up history).
	StatusTrimmed = "trimmed"
	// StatusNeverWritten: beyond the shard's last ACKed position.
	StatusNeverWritten = "never-written"
)

// Location answers `table locate`: where WAL entry Position of Shard went.
type Location struct {
	Table    string `json:"table"`
	Shard    int    `json:"shard"`
	Position uint64 `json:"position"`
	Status   string `json:"status"`
	// Version published the entry, under Plan (0 and "" unless published).
	Version uint64 `json:"version"`
	Plan    string `json:"plan"`
	// File is the data file the entry was written to, and FirstRow/Rows
	// the rows it holds there (row numbers from 0; when the file's record
	// predates entry row counts, FirstRow is -1).
	File     string `json:"file"`
	FirstRow int64  `json:"first_row"`
	Rows     int64  `json:"rows"`
	// InLatest tells whether File is still a fragment of the latest
	// version; RewrittenIn is the first version without it (a compaction,
	// or a delete of the whole fragment), 0 while it is still there.
	InLatest    bool   `json:"in_latest"`
	RewrittenIn uint64 `json:"rewritten_in"`
	// WAL is "retained" or "trimmed": whether the WAL still holds the entry.
	WAL       string `json:"wal"`
	Watermark uint64 `json:"watermark"`
}

// Locate finds which version and data file of table hold WAL entry pos of
// shard, or says that it was never published (pending, trimmed or never
// written). log gives the shard's trimmed and last positions. It reads only.
func Locate(ctx context.Context, log wal.Log, root objstore.Store, table string, shard int, pos uint64) (*Location, error) {
	if pos == 0 {
		return nil, fmt.Errorf("position 0: positions start at 1: %w", errs.ErrInvalid)
	}
	info, err := log.Table(ctx, table)
	if err != nil {
		return nil, err
	}
	if shard < 0 || shard >= info.Shards {
		return nil, fmt.Errorf("table %s has shards 0–%d, not %d: %w", table, info.Shards-1, shard, errs.ErrInvalid)
	}
	dir := root.Sub(table + ".lance")
	ds, err := lance.OpenStore(dir)
	if err != nil {
		return nil, err
	}
	vs, err := history(ctx, ds)
	if err != nil {
		return nil, err
	}
	loc := &Location{Table: table, Shard: shard, Position: pos, FirstRow: -1, WAL: "retained"}
	stats, err := log.Stats(ctx, table, nil)
	if err != nil {
		return nil, err
	}
	var last, trimmed uint64
	for _, sh := range stats.Shards {
		if sh.Shard == shard {
			last, trimmed = sh.LastPosition, sh.TrimmedThrough
		}
	}
	if pos <= trimmed {
		loc.WAL = "trimmed"
	}
	for _, v := range vs {
		for _, r := range v.Ranges {
			if r.Shard == shard && r.From <= pos && pos <= r.To {
				loc.Status, loc.Version, loc.Plan = StatusPublished, v.Version, v.Plan
				if err := findFile(ds, dir, vs, loc); err != nil {
					return nil, err
				}
			}
		}
		loc.Watermark = watermarkAfter(v, shard, loc.Watermark)
	}
	switch {
	case loc.Status != "":
	case pos > last:
		loc.Status, loc.WAL = StatusNeverWritten, "none"
	case pos <= trimmed:
		loc.Status = StatusTrimmed
	default:
		loc.Status = StatusPending
	}
	return loc, nil
}

func watermarkAfter(v Version, shard int, w uint64) uint64 {
	for _, r := range v.Ranges {
		if r.Shard == shard {
			w = max(w, r.To)
		}
	}
	return w
}

// findFile fills the data file of loc's version that holds the entry, its
// rows there, and whether it is still in the latest version.
func findFile(ds *lance.Dataset, dir objstore.Store, vs []Version, loc *Location) error {
	attempts, err := publish.NewStoreOn(dir).AllAttempts()
	if err != nil {
		return err
	}
	m, err := ds.Manifest(loc.Version)
	if err != nil {
		return err
	}
	inVersion := map[string]uint64{} // data file → fragment id
	for _, f := range m.Fragments {
		for _, df := range f.Files {
			inVersion[df.Path] = f.ID
		}
	}
	for _, a := range attempts {
		if a.Plan != loc.Plan {
			continue
		}
		for _, f := range a.Files {
			path := strings.TrimPrefix(f.Descriptor.Path, "data/")
			frag, ok := inVersion[path]
			if !ok || f.Range.Shard != loc.Shard || f.Range.From > loc.Position || loc.Position > f.Range.To {
				continue
			}
			loc.File = f.Descriptor.Path
			if l := f.Lineage; l != nil && int(loc.Position-f.Range.From) < len(l.EntryRows) {
				loc.FirstRow = 0
				for _, n := range l.EntryRows[:loc.Position-f.Range.From] {
					loc.FirstRow += n
				}
				loc.Rows = l.EntryRows[loc.Position-f.Range.From]
			}
			return stillThere(ds, vs, loc, frag)
		}
	}
	return nil
}

// stillThere finds the first version after loc's without fragment frag.
func stillThere(ds *lance.Dataset, vs []Version, loc *Location, frag uint64) error {
	for _, v := range vs {
		if v.Version <= loc.Version {
			continue
		}
		m, err := ds.Manifest(v.Version)
		if err != nil {
			return err
		}
		found := false
		for _, f := range m.Fragments {
			found = found || f.ID == frag
		}
		if !found {
			loc.RewrittenIn = v.Version
			return nil
		}
	}
	loc.InLatest = true
	return nil
}
