package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/wal"
)

// KindDigests is the record kind of a plan's WAL digests.
const KindDigests = "walctl.digests"

// KindRowHash is the record kind of a table's row hash.
const KindRowHash = "walctl.row-hash"

const (
	digestsDir = "_walctl/digests"
	rowHashKey = "_walctl/row-hash.json"
)

// Digests are the order-independent digests of the ACKed records a plan
// covers, one per generation (or the part of one the plan takes), summed
// from the entries as preparation reads them from the WAL (or read again
// from the WAL for an attempt prepared without them) and recorded beside
// the plan before its first commit — so before anything it covers can be
// trimmed.
// They outlive the WAL: an audit compares the table with them where the
// WAL no longer holds the records. They are kept when the plan is retired.
type Digests struct {
	Kind          string `json:"kind"`
	SchemaVersion int    `json:"schema_version"`
	Table         string `json:"table"`
	Plan          string `json:"plan"`
	// Hash is the row hash the digests are made with (absent, 0, in
	// records of older walctl versions: digest.Canonical).
	Hash        digest.Hash        `json:"hash,omitempty"`
	Generations []GenerationDigest `json:"generations"`
}

// RowHash is the row hash d's digests are made with.
func (d *Digests) RowHash() digest.Hash {
	if d.Hash == 0 {
		return digest.Canonical
	}
	return d.Hash
}

// GenerationDigest is the digest of positions From–To of one shard: whole
// sealed generations, except that a plan's first may start inside one.
type GenerationDigest struct {
	Shard  int           `json:"shard"`
	From   uint64        `json:"from"`
	To     uint64        `json:"to"`
	Digest digest.Digest `json:"digest"`
}

func (d *Digests) check() error {
	if err := checkID("plan id", d.Plan); err != nil {
		return err
	}
	if err := d.RowHash().Check(); err != nil {
		return fmt.Errorf("digests of plan %s: %w: %w", d.Plan, err, errs.ErrCorrupt)
	}
	for _, g := range d.Generations {
		if g.Shard < 0 || g.From == 0 || g.From > g.To || g.Digest.Rows < 0 {
			return fmt.Errorf("digests of plan %s: shard %d positions %d–%d is not a range: %w", d.Plan, g.Shard, g.From, g.To, errs.ErrCorrupt)
		}
	}
	return nil
}

// HasDigests reports whether the digests of plan id are recorded.
func (s *Store) HasDigests(ctx context.Context, planID string) (bool, error) {
	_, err := s.st.Stat(ctx, digestsDir+"/"+planID+".json")
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// RecordDigests records d create-if-absent; an existing record of the same
// plan (a predecessor's, computed from the same WAL entries) is kept. A
// failed fsync wraps durable.ErrSyncFailed.
func (s *Store) RecordDigests(d *Digests) error {
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if _, err := s.createRecord(digestsDir+"/"+d.Plan+".json", data); err != nil {
		return fmt.Errorf("record digests of plan %s: %w", d.Plan, err)
	}
	return nil
}

// AllDigests returns every digest record of the table (of published,
// superseded and pending plans alike), in no particular order.
func (s *Store) AllDigests(ctx context.Context) ([]*Digests, error) {
	return listRecords[Digests](ctx, s, digestsDir, KindDigests)
}

// RowHashRecord names the row hash every digest of a table is made with:
// the digests are compared with the table's rows hashed alike, years later.
// It is recorded create-if-absent before the table's first digests and
// never changes.
type RowHashRecord struct {
	Kind          string      `json:"kind"`
	SchemaVersion int         `json:"schema_version"`
	Table         string      `json:"table"`
	Hash          digest.Hash `json:"hash"`
}

// RowHash returns the row hash the table's digests are made with. Unless
// one is recorded it records one, create-if-absent: digest.Latest for a
// table without digests, digest.Canonical for one an older walctl has
// digested (it made them with that hash and recorded none). The record is
// read back, so concurrent callers agree. A failed fsync wraps
// durable.ErrSyncFailed.
//
// An older walctl ignores the record: during a rolling upgrade it may add
// Canonical digests to a table on Columns. It cannot hide damage: an audit
// compares only the digests made with the table's hash, and reports the
// positions of the others as without a digest. Upgrade every worker and
// catch-up image before verifying.
func (s *Store) RowHash(ctx context.Context, table string) (digest.Hash, error) {
	if h, ok, err := s.RecordedRowHash(ctx); err != nil || ok {
		return h, err
	}
	entries, err := s.st.List(ctx, digestsDir)
	if err != nil {
		return 0, err
	}
	h := digest.Latest
	if len(recordKeys(entries)) > 0 {
		h = digest.Canonical
	}
	data, err := json.MarshalIndent(&RowHashRecord{Kind: KindRowHash, SchemaVersion: recordSchema, Table: table, Hash: h}, "", "  ")
	if err != nil {
		return 0, err
	}
	if _, err := s.createRecord(rowHashKey, data); err != nil {
		return 0, fmt.Errorf("record the row hash of %s: %w", table, err)
	}
	h, _, err = s.RecordedRowHash(ctx)
	return h, err
}

// RecordedRowHash returns the table's recorded row hash and true; without
// a record, digest.Canonical and false (the hash of any digest an older
// walctl recorded). It records nothing.
func (s *Store) RecordedRowHash(ctx context.Context) (digest.Hash, bool, error) {
	var r RowHashRecord
	src, err := s.readRecord(rowHashKey, KindRowHash, &r)
	if errors.Is(err, objstore.ErrNotFound) {
		return digest.Canonical, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := r.Hash.Check(); err != nil {
		return 0, false, fmt.Errorf("%s: %w: %w", src.path, err, errs.ErrCorrupt)
	}
	return r.Hash, true, nil
}

// recordKeys are the keys of entries that name records (hidden and
// non-JSON names, e.g. temporaries, are not).
func recordKeys(entries []objstore.Info) []string {
	var out []string
	for _, e := range entries {
		if n := path.Base(e.Key); strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, e.Key)
		}
	}
	return out
}

// listRecords reads every record of kind under dir (hidden and non-JSON
// names, e.g. temporaries, are skipped); the first unreadable one fails.
func listRecords[T any](ctx context.Context, s *Store, dir, kind string) ([]*T, error) {
	entries, err := s.st.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	var out []*T
	for _, key := range recordKeys(entries) {
		r := new(T)
		if _, err := s.readRecord(key, kind, r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// recordDigests records the plan's digests, create-if-absent, from the
// entry digests its files' lineages took while being prepared: the WAL is
// read and hashed once per publication, not once more for the audit.
func (s *Session) recordDigests(ctx context.Context, plan *Plan, hash digest.Hash, jobs []fileJob) error {
	d := newDigests(plan, hash)
	for _, r := range plan.Ranges {
		gens, err := s.p.log.Generations(ctx, plan.Table, r.Shard)
		if err != nil {
			return err
		}
		parts := splitByGeneration(r, gens)
		var summed uint64
		for _, j := range jobs {
			if j.rng.Shard != r.Shard {
				continue
			}
			if err := addEntries(parts, j); err != nil {
				return fmt.Errorf("digests of plan %s: %w", plan.ID, err)
			}
			summed += uint64(len(j.lin.entries))
		}
		if summed != r.To-r.From+1 {
			return fmt.Errorf("digests of plan %s: the files of shard %d took %d entries, its range %d–%d has %d", plan.ID, r.Shard, summed, r.From, r.To, r.To-r.From+1)
		}
		d.Generations = append(d.Generations, parts...)
	}
	return s.store.RecordDigests(d)
}

// addEntries adds the entry digests of j's file to the parts (sorted,
// disjoint) that hold their positions.
func addEntries(parts []GenerationDigest, j fileJob) error {
	k := 0
	for i, ed := range j.lin.entries {
		pos := j.rng.From + uint64(i)
		for k < len(parts) && parts[k].To < pos {
			k++
		}
		if k == len(parts) || parts[k].From > pos {
			return fmt.Errorf("shard %d position %d of file %d is outside the plan's range", j.rng.Shard, pos, j.index)
		}
		parts[k].Digest = parts[k].Digest.Plus(ed)
	}
	return nil
}

func newDigests(plan *Plan, hash digest.Hash) *Digests {
	return &Digests{Kind: KindDigests, SchemaVersion: recordSchema, Table: plan.Table, Plan: plan.ID, Hash: hash, Generations: []GenerationDigest{}}
}

// ensureDigests records the plan's digests unless they are recorded already
// (an attempt reused from a predecessor that stopped before recording them,
// or from an older walctl). It reads the plan's ranges from the WAL, which
// still holds them: nothing above the table's watermarks is trimmed (rule
// 9), and the plan starts there.
func (s *Session) ensureDigests(ctx context.Context, plan *Plan) error {
	ok, err := s.store.HasDigests(ctx, plan.ID)
	if err != nil || ok {
		return err
	}
	hash, err := s.rowHash(ctx)
	if err != nil {
		return err
	}
	d, err := ComputeDigests(ctx, s.p.log, plan, hash)
	if err != nil {
		return err
	}
	return s.store.RecordDigests(d)
}

// ComputeDigests reads the plan's ranges from log and digests them per
// generation, rows hashed by hash. It reads only; cancellation returns
// ctx's error.
func ComputeDigests(ctx context.Context, log wal.Log, plan *Plan, hash digest.Hash) (*Digests, error) {
	d := newDigests(plan, hash)
	for _, r := range plan.Ranges {
		gens, err := log.Generations(ctx, plan.Table, r.Shard)
		if err != nil {
			return nil, err
		}
		parts := splitByGeneration(r, gens)
		for i := range parts {
			g := &parts[i]
			err := log.Read(ctx, plan.Table, r.Shard, g.From, g.To, func(e wal.Entry) error {
				g.Digest.Add(hash, e.Record)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("digest %s shard %d positions %d–%d: %w", plan.Table, r.Shard, g.From, g.To, err)
			}
		}
		d.Generations = append(d.Generations, parts...)
	}
	return d, nil
}

// rowHash returns the table's row hash (Store.RowHash), read or recorded
// once per session: it never changes.
func (s *Session) rowHash(ctx context.Context) (digest.Hash, error) {
	if s.hash == 0 {
		h, err := s.store.RowHash(ctx, s.table)
		if err != nil {
			return 0, err
		}
		s.hash = h
	}
	return s.hash, nil
}

// splitByGeneration cuts r at the generation boundaries gens list; a part
// of r no listed generation covers stays one piece.
func splitByGeneration(r Range, gens []wal.Generation) []GenerationDigest {
	var out []GenerationDigest
	next := r.From
	for _, g := range gens {
		if g.Last < next || g.First > r.To {
			continue
		}
		if g.First > next {
			out = append(out, GenerationDigest{Shard: r.Shard, From: next, To: g.First - 1})
			next = g.First
		}
		to := min(g.Last, r.To)
		out = append(out, GenerationDigest{Shard: r.Shard, From: next, To: to})
		next = to + 1
	}
	if next <= r.To {
		out = append(out, GenerationDigest{Shard: r.Shard, From: next, To: r.To})
	}
	return out
}
