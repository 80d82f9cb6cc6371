package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
)

// Store keeps a table's pinned plans and prepared results in the table's own
// storage, under <table>.lance/_walctl/:
//
//	plans/<key>.json                  the pinned plan for one start (create-if-absent)
//	plans/retired/<id>.json           retired plans
//	attempts/<plan id>/<attempt>.json a complete descriptor set (recorded once whole)
//	attempts/<plan id>/<attempt>.retired.json
//
// Records are created if absent (objstore.Store.PutIfAbsent: locally temp →
// fsync → link(2) → fsync dir; on S3 a PUT with If-None-Match: *), so a
// record is either absent or whole, and a name is never overwritten.
type Store struct {
	st objstore.Store // the dataset's
}

// NewStore returns the store of the dataset in the local directory root.
func NewStore(root string) *Store { return &Store{st: objstore.NewLocal(root)} }

// NewStoreOn returns the store of the dataset rooted at st.
func NewStoreOn(st objstore.Store) *Store { return &Store{st: st} }

const (
	plansDir    = "_walctl/plans"
	attemptsDir = "_walctl/attempts"
)

// Pin records p under its key unless a plan is already pinned there, and
// returns the plan that is pinned (p as read back, or the existing one to
// adopt). The second result reports whether p was the one pinned. A failed
// fsync wraps durable.ErrSyncFailed.
func (s *Store) Pin(p *Plan) (*Plan, bool, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, false, err
	}
	key := plansDir + "/" + p.Key() + ".json"
	created, err := s.createRecord(key, data)
	if err != nil {
		return nil, false, fmt.Errorf("pin plan %s: %w", p.ID, err)
	}
	pinned, err := s.readPlan(key)
	if err != nil {
		return nil, false, err
	}
	return pinned, created && pinned.ID == p.ID, nil
}

// Plans returns every pinned (unretired) plan.
func (s *Store) Plans() ([]*Plan, error) {
	entries, err := s.st.List(context.Background(), plansDir)
	if err != nil {
		return nil, err
	}
	var out []*Plan
	for _, e := range entries {
		if n := path.Base(e.Key); !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		p, err := s.readPlan(e.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // retired meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Guard checks, immediately before a retirement, that the caller still
// holds the table's claim (Session uses the claim's linearizable
// validation). Its error aborts the retirement with nothing changed.
type Guard func(ctx context.Context) error

// RetirePlan moves p's record to plans/retired/ if the pinned record is
// still exactly the one p was read from (rule 8: a compare on the record,
// guarded by the claim). A record retired meanwhile is no error; one
// replaced by another pin is errs.ErrConflict and left in place.
func (s *Store) RetirePlan(ctx context.Context, p *Plan, guard Guard) error {
	if p.src.key == "" {
		return fmt.Errorf("retire plan %s: not read from the store: %w", p.ID, errs.ErrInvalid)
	}
	return s.retire(ctx, guard, p.src, plansDir+"/retired/"+p.ID+".json")
}

func (s *Store) readPlan(key string) (*Plan, error) {
	var p Plan
	src, err := s.readRecord(key, KindPlan, &p)
	if err != nil {
		return nil, err
	}
	p.src = src
	return &p, nil
}

// Prepared is a complete descriptor set: one preparation attempt of a plan.
type Prepared struct {
	Kind          string         `json:"kind"`
	SchemaVersion int            `json:"schema_version"`
	Plan          string         `json:"plan"`
	Attempt       string         `json:"attempt"`
	Files         []PreparedFile `json:"files"`
	PreparedBy    string         `json:"prepared_by"`
	PreparedAt    time.Time      `json:"prepared_at"`

	src recordSource // the file it was read from
}

// matches checks that the descriptor set is plan's: it names the plan, and
// its files hold exactly the plan's file ranges, in order. A set found
// under the plan's key that fails is not published (rule 8).
func (p *Prepared) matches(plan *Plan) error {
	if p.Plan != plan.ID {
		return fmt.Errorf("descriptor set %s names plan %q, found under plan %s: %w", p.Attempt, p.Plan, plan.ID, errs.ErrCorrupt)
	}
	if len(p.Files) != len(plan.Files) {
		return fmt.Errorf("descriptor set %s has %d files, plan %s has %d: %w", p.Attempt, len(p.Files), plan.ID, len(plan.Files), errs.ErrCorrupt)
	}
	for i, f := range p.Files {
		want := plan.Files[i]
		if f.Range.Shard != want.Shard || f.Range.From != want.From || f.Range.To != want.To {
			return fmt.Errorf("descriptor set %s: file %d (%s) holds shard %d positions %d..%d, plan %s's file %d is shard %d positions %d..%d: %w",
				p.Attempt, i, f.Descriptor.Path, f.Range.Shard, f.Range.From, f.Range.To, plan.ID, i, want.Shard, want.From, want.To, errs.ErrCorrupt)
		}
	}
	return nil
}

// PreparedFile is one data file and the WAL range it holds.
type PreparedFile struct {
	Range      Range            `json:"range"`
	Descriptor lance.Descriptor `json:"descriptor"`
	// Lineage is what the file wrote: the digest of its rows and each
	// entry's row count (absent in records of older walctl versions).
	Lineage *FileLineage `json:"lineage,omitempty"`
}

// FileLineage describes the rows a data file holds: their digest, which a
// later audit compares with the table and with the WAL's digests, and the
// row count of each WAL entry in order, which maps a row of the file to its
// WAL position (EntryRows[i] rows of position Range.From+i).
type FileLineage struct {
	// Hash is the row hash Digest is made with (absent in records of older
	// walctl versions: digest.Canonical).
	Hash      digest.Hash   `json:"hash,omitempty"`
	Digest    digest.Digest `json:"digest"`
	EntryRows []int64       `json:"entry_rows"`
	// entries is each entry's digest, in order, while the file is being
	// prepared: the plan's per-generation digests are summed from them, so
	// a publication hashes its rows once (not recorded).
	entries []digest.Digest
}

func (l *FileLineage) add(rec arrow.RecordBatch) {
	var d digest.Digest
	d.Add(l.Hash, rec)
	l.Digest = l.Digest.Plus(d)
	l.EntryRows = append(l.EntryRows, rec.NumRows())
	l.entries = append(l.entries, d)
}

// Position returns the WAL position of row (0-based) of a file starting at
// from, and false when row is beyond the file's entries.
func (l *FileLineage) Position(from uint64, row int64) (uint64, bool) {
	for i, n := range l.EntryRows {
		if row < n {
			return from + uint64(i), true
		}
		row -= n
	}
	return 0, false
}

// Descriptors lists the files' descriptors in plan order.
func (p *Prepared) Descriptors() []lance.Descriptor {
	out := make([]lance.Descriptor, len(p.Files))
	for i, f := range p.Files {
		out[i] = f.Descriptor
	}
	return out
}

// Record records a complete descriptor set (it is never called with a
// partial one) and returns it as read back from the store. The data files
// it names must be durable already (lance.FileWriter.Close syncs them and
// their directory). A failed fsync wraps durable.ErrSyncFailed.
func (s *Store) Record(p *Prepared) (*Prepared, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	key := attemptsDir + "/" + p.Plan + "/" + p.Attempt + ".json"
	created, err := s.createRecord(key, data)
	if err != nil {
		return nil, fmt.Errorf("record descriptor set %s: %w", p.Attempt, err)
	}
	if !created {
		return nil, fmt.Errorf("descriptor set %s already recorded: %w", p.Attempt, errs.ErrConflict)
	}
	var got Prepared
	if got.src, err = s.readRecord(key, KindPrepared, &got); err != nil {
		return nil, err
	}
	return &got, nil
}

// Attempts returns the unretired descriptor sets of a plan, newest first.
func (s *Store) Attempts(planID string) ([]*Prepared, error) {
	entries, err := s.st.List(context.Background(), attemptsDir+"/"+planID)
	if err != nil {
		return nil, err
	}
	out, err := s.readAttempts(entries, false)
	sort.Slice(out, func(i, j int) bool { return out[i].PreparedAt.After(out[j].PreparedAt) })
	return out, err
}

// AllAttempts returns every descriptor set recorded for the table, of every
// plan, retired ones included, in no particular order. Readers use it to
// learn the WAL range of each published data file (verification): a data
// file's path is unique to its attempt, so a path found in a manifest names
// exactly one descriptor.
func (s *Store) AllAttempts() ([]*Prepared, error) {
	entries, err := s.st.ListTree(context.Background(), attemptsDir)
	if err != nil {
		return nil, err
	}
	var sets []objstore.Info
	for _, e := range entries {
		if strings.Count(strings.TrimPrefix(e.Key, attemptsDir+"/"), "/") == 1 { // <plan>/<attempt>.json
			sets = append(sets, e)
		}
	}
	return s.readAttempts(sets, true)
}

// readAttempts reads the descriptor sets listed.
func (s *Store) readAttempts(entries []objstore.Info, retired bool) ([]*Prepared, error) {
	var out []*Prepared
	for _, e := range entries {
		n := path.Base(e.Key)
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") || (!retired && strings.HasSuffix(n, ".retired.json")) {
			continue
		}
		var p Prepared
		src, err := s.readRecord(e.Key, KindPrepared, &p)
		if err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue // retired meanwhile
			}
			return nil, err
		}
		p.src = src
		out = append(out, &p)
	}
	return out, nil
}

// RetireAttempt moves a descriptor set aside so it is never used again, if
// its record is still exactly the one p was read from, guarded by the
// claim (rule 8), like RetirePlan.
func (s *Store) RetireAttempt(ctx context.Context, p *Prepared, guard Guard) error {
	if p.src.key == "" {
		return fmt.Errorf("retire attempt %s: not read from the store: %w", p.Attempt, errs.ErrInvalid)
	}
	return s.retire(ctx, guard, p.src, attemptsDir+"/"+p.Plan+"/"+p.Attempt+".retired.json")
}

// maxRecordBytes bounds a plan or descriptor-set record: a plan of the
// largest limits lists a few thousand files, far below it.
const maxRecordBytes = 64 << 20

// recordSource is the record as read, with its identity, so a retirement
// can compare the record in the store with the one read: on a local
// directory the file (device and inode), on an object store the ETag.
type recordSource struct {
	key  string
	path string      // local: the file
	fi   os.FileInfo // local: its identity
	etag string      // object store: its identity
	data []byte      // object store: the bytes read
}

// readRecord reads the record at key into v, checking its kind and schema
// version, and returns where it came from. The identity and the bytes come
// from one open file (one GET), so they describe the same record.
func (s *Store) readRecord(key, kind string, v any) (recordSource, error) {
	src := recordSource{key: key, path: s.st.Join(key)}
	var data []byte
	if s.st.Local() != "" {
		f, err := os.Open(src.path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return src, fmt.Errorf("%s: %w: %w", src.path, objstore.ErrNotFound, err)
			}
			return src, err
		}
		defer f.Close()
		if src.fi, err = f.Stat(); err != nil {
			return src, err
		}
		if src.fi.Size() > maxRecordBytes {
			return src, fmt.Errorf("%s: %d bytes, a record is at most %d: %w", src.path, src.fi.Size(), maxRecordBytes, errs.ErrCorrupt)
		}
		if data, err = io.ReadAll(io.LimitReader(f, maxRecordBytes+1)); err != nil {
			return src, fmt.Errorf("read %s: %w", src.path, err)
		}
	} else {
		tg, ok := s.st.(objstore.Tagged)
		if !ok {
			return src, fmt.Errorf("%s: the store cannot compare records (no ETags): %w", s.st, errs.ErrInvalid)
		}
		var err error
		if data, src.etag, err = tg.GetTagged(context.Background(), key); err != nil {
			return src, err
		}
		src.data = data
	}
	if err := decodeRecord(data, kind, v); err != nil {
		return src, fmt.Errorf("%s: %w", src.path, err)
	}
	return src, nil
}

// decodeRecord decodes one record's bytes into v, failing closed (an
// errs.ErrCorrupt) on another kind, an unknown schema version or field, or
// trailing data.
func decodeRecord(data []byte, kind string, v any) error {
	var head struct {
		Kind          string `json:"kind"`
		SchemaVersion int    `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("%v: %w", err, errs.ErrCorrupt)
	}
	if head.Kind != kind || head.SchemaVersion < 1 || head.SchemaVersion > recordSchema {
		return fmt.Errorf("record kind %q schema version %d, this walctl reads %q version %d: %w",
			head.Kind, head.SchemaVersion, kind, recordSchema, errs.ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%v: %w", err, errs.ErrCorrupt)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the record: %w", errs.ErrCorrupt)
	}
	if c, ok := v.(interface{ check() error }); ok {
		return c.check()
	}
	return nil
}

// createRecord creates key with data unless it exists, and on a local
// directory syncs the directories above it up to the dataset, so a new
// plans/ or attempts/<plan>/ cannot vanish with the record. It reports
// whether it created the record.
func (s *Store) createRecord(key string, data []byte) (bool, error) {
	err := s.st.PutIfAbsent(context.Background(), key, data, nil)
	if errors.Is(err, objstore.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var above []string
	for d := path.Dir(path.Dir(key)); d != "." && d != "/"; d = path.Dir(d) {
		above = append(above, d)
	}
	return true, s.st.SyncDirs(context.Background(), above...)
}

// createOwnRecord creates a record under a key unique to its writer (a new
// id). A create refused as existing is not a lost race: the key is read
// back, and the record counts as created only if it holds these bytes (an
// earlier answer was lost); a store that refused a key nobody wrote (some
// do under contention) is asked again, a few times, waiting on clk.
func (s *Store) createOwnRecord(clk clock.Clock, key string, data []byte) error {
	for attempt := 1; ; attempt++ {
		created, err := s.createRecord(key, data)
		if err != nil || created {
			return err
		}
		got, err := s.st.Get(context.Background(), key)
		switch {
		case err == nil && bytes.Equal(got, data):
			return nil
		case err == nil:
			return fmt.Errorf("record %s holds another record than the one this writer created: %w", s.st.Join(key), errs.ErrCorrupt)
		case !errors.Is(err, objstore.ErrNotFound):
			return err
		case attempt == 3:
			return fmt.Errorf("record %s: %d creates were refused as existing, yet nothing is there: %w", s.st.Join(key), attempt, errs.ErrUnavailable)
		}
		clk.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
}
