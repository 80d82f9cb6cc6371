// Package verify checks a table against the WAL it was published from
// (`walctl verify`): every ACKed record at or below the table's watermarks
// is in the table exactly once, none above them is, and the data files say
// what their descriptor sets say. It reads only: the table through walctl's
// managed reader, the WAL through Read and Stats.
package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
)

// ErrMismatch is returned (wrapped) when the table and the WAL disagree.
var ErrMismatch = fmt.Errorf("table does not match the WAL: %w", errs.ErrCorrupt)

// Problem kinds.
const (
	// KindMissing: ACKed records at or below the watermark are not in the
	// table (a gap between published ranges, rows missing from a file, or a
	// WAL trimmed beyond the table's watermark).
	KindMissing = "missing"
	// KindDuplicated: records are in the table more than once (overlapping
	// published ranges, repeated rows in a file).
	KindDuplicated = "duplicated"
	// KindUnexpected: the table holds rows that are not in the WAL range
	// their file claims (altered data).
	KindUnexpected = "unexpected"
	// KindUnpublished: records above the watermark are in the table.
	KindUnpublished = "above-watermark"
	// KindRowCount: a data file's row count differs from its descriptor.
	KindRowCount = "row-count"
	// KindDamagedFile: a published data file is missing or differs from its
	// descriptor (size, checksum); rows are then not compared.
	KindDamagedFile = "damaged-file"
)

// Problem is one disagreement.
type Problem struct {
	Kind     string `json:"kind"`
	Shard    int    `json:"shard"`
	From     uint64 `json:"from,omitempty"`
	To       uint64 `json:"to,omitempty"`
	Fragment *int64 `json:"fragment,omitempty"`
	Rows     int64  `json:"rows"`
	Detail   string `json:"detail"`
}

// ShardReport summarises one shard.
type ShardReport struct {
	Shard          int    `json:"shard"`
	Watermark      uint64 `json:"watermark"`
	TrimmedThrough uint64 `json:"trimmed_through"`
	LastPosition   uint64 `json:"last_position"`
	// PublishedTo is the end of the contiguous published ranges from 1.
	PublishedTo uint64 `json:"published_to"`
	// CheckedEntries are retained WAL entries at or below the watermark
	// compared row by row with the table; PendingEntries those above it.
	CheckedEntries int64 `json:"checked_entries"`
	PendingEntries int64 `json:"pending_entries"`
	// UncomparedEntries are published positions (at or below the watermark)
	// the WAL has trimmed: their files' ranges, sizes and checksums are
	// checked, their rows cannot be compared with the records.
	UncomparedEntries uint64 `json:"uncompared_entries"`
}

// Report is the result of a verification.
type Report struct {
	Table       string             `json:"table"`
	Version     uint64             `json:"version"`
	Epoch       uint64             `json:"epoch"`
	Watermarks  publish.Watermarks `json:"watermarks"`
	Fragments   int                `json:"fragments"`
	TableRows   int64              `json:"table_rows"`
	WalctlRows  int64              `json:"walctl_rows"`  // rows of files walctl published
	ForeignRows int64              `json:"foreign_rows"` // rows of fragments without a walctl descriptor (not checked)
	CheckedRows int64              `json:"checked_rows"` // table rows compared with retained WAL entries
	// UncomparedRows are rows of walctl files whose WAL range is trimmed, in
	// UncomparedFragments fragments: not compared row by row (see Checked).
	UncomparedRows      int64 `json:"uncompared_rows"`
	UncomparedFragments int   `json:"uncompared_fragments"`
	// Complete is set when every row of the table was compared with the
	// WAL records it came from.
	Complete   bool  `json:"complete"`
	Missing    int64 `json:"missing"`
	Duplicated int64 `json:"duplicated"`
	Unexpected int64 `json:"unexpected"`
	// AboveWatermark are table rows equal to retained WAL records above the
	// watermark (published without the watermark that covers them).
	AboveWatermark int64         `json:"above_watermark"`
	Shards         []ShardReport `json:"shards"`
	Problems       []Problem     `json:"problems"`
	OK             bool          `json:"ok"`
}

// Err is nil for a clean report and otherwise wraps ErrMismatch with a
// one-line summary.
func (r *Report) Err() error {
	if r.OK {
		return nil
	}
	return fmt.Errorf("table %s version %d: %d missing, %d duplicated, %d unexpected, %d above-watermark record(s), %d problem(s): %w",
		r.Table, r.Version, r.Missing, r.Duplicated, r.Unexpected, r.AboveWatermark, len(r.Problems), ErrMismatch)
}

// Options select what to verify.
type Options struct {
	// LanceRoot is the directory of tables, used when Store is nil.
	LanceRoot string
	// Store is the lance root on a store (a directory or an S3 prefix).
	Store objstore.Store
	// Table is the table's name.
	Table string
	// Version is the version to verify (0: the latest).
	Version uint64
}

// published is one walctl data file in the verified version.
type published struct {
	frag int64
	rng  publish.Range
	rows int64
}

// Table verifies one table against log. It returns a report whenever it
// could read both sides (check Report.OK or Report.Err); an error means it
// could not (unknown table, an unreadable or corrupt data file, the WAL
// unavailable). It writes nothing, so cancellation leaves nothing behind.
func Table(ctx context.Context, log wal.Log, opts Options) (*Report, error) {
	if opts.Store == nil {
		if objstore.HasScheme(opts.LanceRoot) {
			return nil, fmt.Errorf("%s: %w", opts.LanceRoot, lance.ErrNotLocal)
		}
		opts.Store = objstore.NewLocal(opts.LanceRoot)
	}
	r, err := publish.OpenReaderOn(opts.Store, opts.Table, publish.Selection{Version: opts.Version})
	if err != nil {
		return nil, err
	}
	info, err := log.Table(ctx, opts.Table)
	if err != nil {
		return nil, err
	}
	stats, err := log.Stats(ctx, opts.Table, r.State.Watermarks)
	if err != nil {
		return nil, err
	}
	dir := opts.Store.Sub(opts.Table + ".lance")
	byPath, err := preparedByPath(dir)
	if err != nil {
		return nil, err
	}
	v := &verifier{ctx: ctx, log: log, table: opts.Table, h: newHasher(), shards: map[int]*ShardReport{}}
	rep := &Report{Table: opts.Table, Version: r.Manifest.Version, Epoch: r.State.Epoch, Watermarks: r.State.Watermarks,
		Fragments: len(r.Manifest.Fragments), Problems: []Problem{}}
	v.rep = rep
	v.initShards(stats, info.Shards, r.State.Watermarks)
	if err := v.pending(); err != nil {
		return nil, err
	}
	damaged, err := v.files(dir, r, byPath)
	if err != nil {
		return nil, err
	}
	files, err := v.scan(r, byPath, damaged)
	if err != nil {
		return nil, fmt.Errorf("read table %s version %d: %w", opts.Table, rep.Version, err)
	}
	if err := v.coverage(files); err != nil {
		return nil, err
	}
	for s := 0; s < info.Shards; s++ {
		sr := *v.shards[s]
		sr.UncomparedEntries = min(sr.TrimmedThrough, sr.Watermark)
		rep.Shards = append(rep.Shards, sr)
	}
	rep.OK = len(rep.Problems) == 0
	rep.Complete = rep.OK && rep.CheckedRows == rep.TableRows
	return rep, nil
}

// preparedByPath maps every data file a recorded attempt prepared in the
// table's store dir, by its path under data/.
func preparedByPath(dir objstore.Store) (map[string]publish.PreparedFile, error) {
	attempts, err := publish.NewStoreOn(dir).AllAttempts()
	if err != nil {
		return nil, err
	}
	byPath := map[string]publish.PreparedFile{}
	for _, a := range attempts {
		for _, f := range a.Files {
			byPath[strings.TrimPrefix(f.Descriptor.Path, "data/")] = f
		}
	}
	return byPath, nil
}

// initShards starts a report for each of the table's shards.
func (v *verifier) initShards(stats wal.TableStats, shards int, watermarks map[int]uint64) {
	for _, sh := range stats.Shards {
		v.shards[sh.Shard] = &ShardReport{Shard: sh.Shard, Watermark: watermarks[sh.Shard], TrimmedThrough: sh.TrimmedThrough, LastPosition: sh.LastPosition}
	}
	for s := 0; s < shards; s++ {
		if v.shards[s] == nil {
			v.shards[s] = &ShardReport{Shard: s, Watermark: watermarks[s]}
		}
	}
}

// scan reads the table's rows and compares each walctl fragment with the
// WAL; it returns the published ranges. The rows of a damaged table are
// not compared; the ranges are.
func (v *verifier) scan(r *publish.Reader, byPath map[string]publish.PreparedFile, damaged bool) ([]published, error) {
	var files []published
	if damaged {
		for _, frag := range r.Manifest.Fragments {
			if len(frag.Files) > 0 {
				if pf, ok := byPath[frag.Files[0].Path]; ok {
					files = append(files, published{frag: int64(frag.ID), rng: pf.Range, rows: int64(frag.PhysicalRows)})
				}
			}
		}
		return files, nil
	}
	rep := v.rep
	k := 0
	err := r.Scan(v.ctx, nil, func(rec arrow.RecordBatch) error {
		frag := r.Manifest.Fragments[k]
		k++
		rep.TableRows += rec.NumRows()
		if n := v.abovePending(rec); n > 0 {
			rep.AboveWatermark += n
			v.problem(Problem{Kind: KindUnpublished, Shard: -1, Fragment: ptr(int64(frag.ID)), Rows: n,
				Detail: fmt.Sprintf("%d row(s) of fragment %d are WAL records above the watermark", n, frag.ID)})
		}
		var pf publish.PreparedFile
		ok := len(frag.Files) > 0
		if ok {
			pf, ok = byPath[frag.Files[0].Path]
		}
		if !ok {
			rep.ForeignRows += rec.NumRows()
			return nil
		}
		rep.WalctlRows += rec.NumRows()
		files = append(files, published{frag: int64(frag.ID), rng: pf.Range, rows: rec.NumRows()})
		if uint64(rec.NumRows()) != pf.Descriptor.Rows {
			v.problem(Problem{Kind: KindRowCount, Shard: pf.Range.Shard, From: pf.Range.From, To: pf.Range.To, Fragment: ptr(int64(frag.ID)),
				Rows: rec.NumRows() - int64(pf.Descriptor.Rows), Detail: fmt.Sprintf("fragment %d has %d rows, its descriptor %d", frag.ID, rec.NumRows(), pf.Descriptor.Rows)})
		}
		return v.fragment(int64(frag.ID), pf.Range, rec)
	})
	return files, err
}

// Summary says in one line what was verified, and what was not: it claims
// "no missing or duplicated records" only for the rows it compared.
func (r *Report) Summary() string {
	if !r.OK {
		return r.Err().Error()
	}
	head := fmt.Sprintf("verified %s version %d: %d rows", r.Table, r.Version, r.TableRows)
	if r.TableRows == 0 && r.Complete {
		return head + ", nothing to compare"
	}
	if r.Complete {
		return head + ", every one compared with its WAL record: no missing or duplicated records"
	}
	var b strings.Builder
	b.WriteString(head)
	if r.CheckedRows > 0 {
		fmt.Fprintf(&b, "; %d compared with their WAL records: no missing or duplicated records among them", r.CheckedRows)
	} else {
		b.WriteString("; none compared with WAL records")
	}
	if r.UncomparedRows > 0 {
		var trimmed []string
		for _, s := range r.Shards {
			if s.UncomparedEntries > 0 {
				trimmed = append(trimmed, fmt.Sprintf("shard %d positions 1–%d", s.Shard, s.UncomparedEntries))
			}
		}
		fmt.Fprintf(&b, "; %d rows in %d fragment(s) not compared, their WAL ranges are trimmed (%s): only their ranges (no gap, no overlap up to the watermark), sizes, checksums and row counts were checked",
			r.UncomparedRows, r.UncomparedFragments, strings.Join(trimmed, ", "))
	}
	if r.ForeignRows > 0 {
		fmt.Fprintf(&b, "; %d rows of fragments walctl did not write not checked", r.ForeignRows)
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

// files checks every walctl data file of the version against its descriptor
// (existence, size, checksum) and reports whether any is damaged.
func (v *verifier) files(root objstore.Store, r *publish.Reader, byPath map[string]publish.PreparedFile) (bool, error) {
	ds, err := lance.OpenStore(root)
	if err != nil {
		return false, err
	}
	damaged := false
	for _, frag := range r.Manifest.Fragments {
		if len(frag.Files) == 0 {
			continue
		}
		pf, ok := byPath[frag.Files[0].Path]
		if !ok {
			continue
		}
		err := ds.VerifyFile(pf.Descriptor)
		switch {
		case errors.Is(err, lance.ErrMissingFile), errors.Is(err, lance.ErrCorruptFile):
			damaged = true
			v.problem(Problem{Kind: KindDamagedFile, Shard: pf.Range.Shard, From: pf.Range.From, To: pf.Range.To, Fragment: ptr(int64(frag.ID)),
				Rows: int64(pf.Descriptor.Rows), Detail: err.Error()})
		case err != nil:
			return false, err
		}
	}
	return damaged, nil
}

// coverage checks, per shard, that the published ranges tile [1, watermark]
// with neither gaps nor overlaps, and that the WAL was not trimmed beyond
// the watermark.
func (v *verifier) coverage(files []published) error {
	byShard := map[int][]published{}
	for _, f := range files {
		byShard[f.rng.Shard] = append(byShard[f.rng.Shard], f)
	}
	shards := make([]int, 0, len(v.shards))
	for s := range v.shards {
		shards = append(shards, s)
	}
	sort.Ints(shards)
	for _, s := range shards {
		sr := v.shards[s]
		fs := byShard[s]
		sort.Slice(fs, func(i, j int) bool { return fs[i].rng.From < fs[j].rng.From })
		next := uint64(1)
		for _, f := range fs {
			if f.rng.From > next {
				if err := v.gap(s, next, f.rng.From-1, "no published file covers"); err != nil {
					return err
				}
			}
			if f.rng.From < next {
				to := min(f.rng.To, next-1)
				rows, err := v.rangeRows(s, f.rng.From, to, f.rows)
				if err != nil {
					return err
				}
				v.rep.Duplicated += rows
				v.problem(Problem{Kind: KindDuplicated, Shard: s, From: f.rng.From, To: to, Fragment: ptr(f.frag), Rows: rows,
					Detail: fmt.Sprintf("fragment %d publishes positions %d–%d of shard %d again", f.frag, f.rng.From, to, s)})
			}
			next = max(next, f.rng.To+1)
		}
		sr.PublishedTo = next - 1
		if next-1 < sr.Watermark {
			if err := v.gap(s, next, sr.Watermark, "the watermark covers positions no published file holds:"); err != nil {
				return err
			}
		}
		if sr.TrimmedThrough > sr.Watermark {
			v.problem(Problem{Kind: KindMissing, Shard: s, From: sr.Watermark + 1, To: sr.TrimmedThrough,
				Detail: fmt.Sprintf("the WAL is trimmed through %d, beyond the table's watermark %d: those records are lost", sr.TrimmedThrough, sr.Watermark)})
		}
	}
	return nil
}

// gap reports positions from–to of shard s as missing.
func (v *verifier) gap(s int, from, to uint64, why string) error {
	rows, err := v.rangeRows(s, from, to, 0)
	if err != nil {
		return err
	}
	v.rep.Missing += rows
	v.problem(Problem{Kind: KindMissing, Shard: s, From: from, To: to, Rows: rows,
		Detail: fmt.Sprintf("%s positions %d–%d of shard %d", why, from, to, s)})
	return nil
}

func (v *verifier) problem(p Problem) { v.rep.Problems = append(v.rep.Problems, p) }
