// Package verify audits a table against the WAL it was published from
// (`walctl verify`): per shard, the multiset of records in the table equals
// the multiset of ACKed records from position 1 to the watermark — compared
// record by record where the WAL retains them and by the digests recorded
// beside each plan where it is trimmed — whatever compaction, official
// appends and deletions did to the fragments; none above the watermark is
// in the table, and walctl's data files say what their descriptors say. It
// reads only: the table through walctl's managed reader, the WAL through
// Read and Stats, walctl's records under _walctl/.
package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walctl/walctl/internal/core/digest"
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
	// table (named by shard and position where the WAL holds them, or where
	// the row deleted from a walctl file says), or the WAL was trimmed
	// beyond the table's watermark.
	KindMissing = "missing"
	// KindDuplicated: a record is in the table more than once (a foreign
	// row equal to an ACKed record, a file published twice).
	KindDuplicated = "duplicated"
	// KindUnexpected: rows the digests of the trimmed positions cannot
	// account for (altered content, or foreign rows walctl cannot tell from
	// published ones after a compaction).
	KindUnexpected = "unexpected"
	// KindUnpublished: records above the watermark are in the table.
	KindUnpublished = "above-watermark"
	// KindDamagedFile: a published data file is missing or differs from its
	// descriptor (size, checksum); rows are then not compared.
	KindDamagedFile = "damaged-file"
	// KindNoDigest: trimmed positions have no recorded digest (published by
	// a walctl older than digests): their rows cannot be audited.
	KindNoDigest = "no-digest"
)

// Problem is one disagreement. Shard is -1 when it cannot be attributed to
// one shard; From–To are WAL positions; Fragment and Row locate a table row.
type Problem struct {
	Kind     string `json:"kind"`
	Shard    int    `json:"shard"`
	From     uint64 `json:"from,omitempty"`
	To       uint64 `json:"to,omitempty"`
	Fragment *int64 `json:"fragment,omitempty"`
	Row      *int64 `json:"row,omitempty"`
	Rows     int64  `json:"rows"`
	Detail   string `json:"detail"`
}

// ShardReport summarises one shard.
type ShardReport struct {
	Shard          int    `json:"shard"`
	Watermark      uint64 `json:"watermark"`
	TrimmedThrough uint64 `json:"trimmed_through"`
	LastPosition   uint64 `json:"last_position"`
	// DigestThrough is the last position compared by digest (1–DigestThrough),
	// WALEntries the retained entries after it, up to the watermark, compared
	// record by record; PendingEntries are the retained entries above the
	// watermark (none of their records may be in the table).
	DigestThrough  uint64 `json:"digest_through"`
	WALEntries     int64  `json:"wal_entries"`
	WALRecords     int64  `json:"wal_records"`
	DigestRecords  int64  `json:"digest_records"`
	PendingEntries int64  `json:"pending_entries"`
}

// Report is the result of an audit: per shard, the multiset of records in
// the table against the ACKed records 1..watermark.
type Report struct {
	Table       string             `json:"table"`
	Version     uint64             `json:"version"`
	Epoch       uint64             `json:"epoch"`
	Watermarks  publish.Watermarks `json:"watermarks"`
	Fragments   int                `json:"fragments"`
	TableRows   int64              `json:"table_rows"`   // live rows (deletions honoured)
	DeletedRows int64              `json:"deleted_rows"` // rows deletion files remove
	// RowHash is the row hash the table's digests are made with, and every
	// row is compared by (digest.Hash: 1 or 2).
	RowHash digest.Hash `json:"row_hash"`
	// ComparedWAL records were compared one by one with the retained WAL,
	// ComparedDigest by the digests of trimmed positions; ForeignRows are
	// rows of fragments another writer appended.
	ComparedWAL    int64 `json:"compared_wal"`
	ComparedDigest int64 `json:"compared_digest"`
	ForeignRows    int64 `json:"foreign_rows"`
	Missing        int64 `json:"missing"`
	Duplicated     int64 `json:"duplicated"`
	Unexpected     int64 `json:"unexpected"`
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

// Table audits one table against log: for every shard, the records in
// the selected version (whatever compaction, official appends and deletions
// did to its fragments) against the ACKed records 1..watermark, compared
// one by one where the WAL retains them and by the digests recorded beside
// each plan where it is trimmed. It returns a report whenever it could read
// both sides (check Report.OK or Report.Err); an error means it could not
// (unknown table, an unreadable data file, the WAL unavailable). It writes
// nothing, so cancellation leaves nothing behind.
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
	hash, _, err := publish.NewStoreOn(dir).RecordedRowHash(ctx)
	if err != nil {
		return nil, err
	}
	v := &verifier{ctx: ctx, log: log, table: opts.Table, hash: hash, shards: map[int]*ShardReport{}}
	rep := &Report{Table: opts.Table, Version: r.Manifest.Version, Epoch: r.State.Epoch, Watermarks: r.State.Watermarks,
		Fragments: len(r.Manifest.Fragments), RowHash: hash, Shards: []ShardReport{}, Problems: []Problem{}}
	v.rep = rep
	v.initShards(stats, info.Shards, r.State.Watermarks)
	if err := v.pending(); err != nil {
		return nil, err
	}
	damaged, err := v.files(dir, r, byPath)
	if err != nil {
		return nil, err
	}
	if !damaged {
		if err := v.audit(r, dir, byPath); err != nil {
			return nil, fmt.Errorf("audit table %s version %d: %w", opts.Table, rep.Version, err)
		}
	}
	for s := 0; s < info.Shards; s++ {
		rep.Shards = append(rep.Shards, *v.shards[s])
	}
	rep.OK = len(rep.Problems) == 0
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

// Summary says in one line what was checked and how: it never claims
// more than it compared.
func (r *Report) Summary() string {
	if !r.OK {
		return r.Err().Error()
	}
	return fmt.Sprintf("verified %s version %d: %d rows; compared %d records with the WAL, %d by digest, %d foreign rows: no missing or duplicated records",
		r.Table, r.Version, r.TableRows, r.ComparedWAL, r.ComparedDigest, r.ForeignRows)
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

func (v *verifier) problem(p Problem) { v.rep.Problems = append(v.rep.Problems, p) }
