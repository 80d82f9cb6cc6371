package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
)

// Store keeps a table's pinned plans and prepared results in the table's own
// storage, under <table>.lance/_walctl/:
//
//	plans/<key>.json                  the pinned plan for one start (create-if-absent)
//	plans/retired/<id>.json           retired plans
//	attempts/<plan id>/<attempt>.json a complete descriptor set (recorded once whole)
//	attempts/<plan id>/<attempt>.retired.json
//
// Records are written temp → fsync → link(2) → fsync dir, so a record is
// either absent or whole, and a name is never overwritten.
type Store struct {
	root string // the dataset directory
}

// NewStore returns the store of the dataset at root.
func NewStore(root string) *Store { return &Store{root: root} }

func (s *Store) plansDir() string    { return filepath.Join(s.root, "_walctl", "plans") }
func (s *Store) attemptsDir() string { return filepath.Join(s.root, "_walctl", "attempts") }

// Pin records p under its key unless a plan is already pinned there, and
// returns the plan that is pinned (p as read back, or the existing one to
// adopt). The second result reports whether p was the one pinned. A failed
// fsync wraps durable.ErrSyncFailed.
func (s *Store) Pin(p *Plan) (*Plan, bool, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, false, err
	}
	path := filepath.Join(s.plansDir(), p.Key()+".json")
	created, err := s.createRecord(path, data)
	if err != nil {
		return nil, false, fmt.Errorf("pin plan %s: %w", p.ID, err)
	}
	pinned, err := s.readPlan(path)
	if err != nil {
		return nil, false, err
	}
	return pinned, created && pinned.ID == p.ID, nil
}

// Plans returns every pinned (unretired) plan.
func (s *Store) Plans() ([]*Plan, error) {
	entries, err := os.ReadDir(s.plansDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Plan
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p, err := s.readPlan(filepath.Join(s.plansDir(), e.Name()))
		if errors.Is(err, os.ErrNotExist) {
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
	if p.src.path == "" {
		return fmt.Errorf("retire plan %s: not read from the store: %w", p.ID, errs.ErrInvalid)
	}
	return retireRecord(ctx, guard, p.src, filepath.Join(s.plansDir(), "retired", p.ID+".json"))
}

func (s *Store) readPlan(path string) (*Plan, error) {
	var p Plan
	src, err := readRecord(path, KindPlan, &p)
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

// PreparedFile is one data file and the WAL range it holds.
type PreparedFile struct {
	Range      Range            `json:"range"`
	Descriptor lance.Descriptor `json:"descriptor"`
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
	path := filepath.Join(s.attemptsDir(), p.Plan, p.Attempt+".json")
	created, err := s.createRecord(path, data)
	if err != nil {
		return nil, fmt.Errorf("record descriptor set %s: %w", p.Attempt, err)
	}
	if !created {
		return nil, fmt.Errorf("descriptor set %s already recorded: %w", p.Attempt, errs.ErrConflict)
	}
	var got Prepared
	if got.src, err = readRecord(path, KindPrepared, &got); err != nil {
		return nil, err
	}
	return &got, nil
}

// Attempts returns the unretired descriptor sets of a plan, newest first.
func (s *Store) Attempts(planID string) ([]*Prepared, error) {
	out, err := readAttempts(filepath.Join(s.attemptsDir(), planID), false)
	sort.Slice(out, func(i, j int) bool { return out[i].PreparedAt.After(out[j].PreparedAt) })
	return out, err
}

// AllAttempts returns every descriptor set recorded for the table, of every
// plan, retired ones included, in no particular order. Readers use it to
// learn the WAL range of each published data file (verification): a data
// file's path is unique to its attempt, so a path found in a manifest names
// exactly one descriptor.
func (s *Store) AllAttempts() ([]*Prepared, error) {
	plans, err := os.ReadDir(s.attemptsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Prepared
	for _, pd := range plans {
		if !pd.IsDir() {
			continue
		}
		got, err := readAttempts(filepath.Join(s.attemptsDir(), pd.Name()), true)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// readAttempts reads the descriptor sets recorded in one plan's directory.
func readAttempts(dir string, retired bool) ([]*Prepared, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Prepared
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") || (!retired && strings.HasSuffix(n, ".retired.json")) {
			continue
		}
		var p Prepared
		src, err := readRecord(filepath.Join(dir, n), KindPrepared, &p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
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
	if p.src.path == "" {
		return fmt.Errorf("retire attempt %s: not read from the store: %w", p.Attempt, errs.ErrInvalid)
	}
	dir := filepath.Join(s.attemptsDir(), p.Plan)
	return retireRecord(ctx, guard, p.src, filepath.Join(dir, p.Attempt+".retired.json"))
}

// maxRecordBytes bounds a plan or descriptor-set record: a plan of the
// largest limits lists a few thousand files, far below it.
const maxRecordBytes = 64 << 20

// recordSource is the file a record was read from, with its identity, so a
// retirement can compare the record on disk with the one read.
type recordSource struct {
	path string
	fi   os.FileInfo
}

// readRecord reads the record at path into v, checking its kind and schema
// version, and returns where it came from. The identity and the bytes come
// from one open file, so they describe the same record.
func readRecord(path, kind string, v any) (recordSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return recordSource{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return recordSource{}, err
	}
	if fi.Size() > maxRecordBytes {
		return recordSource{}, fmt.Errorf("%s: %d bytes, a record is at most %d: %w", path, fi.Size(), maxRecordBytes, errs.ErrCorrupt)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return recordSource{}, fmt.Errorf("read %s: %w", path, err)
	}
	if err := decodeRecord(data, kind, v); err != nil {
		return recordSource{}, fmt.Errorf("%s: %w", path, err)
	}
	return recordSource{path: path, fi: fi}, nil
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

// createRecord creates path with data unless it exists (temp file, fsync,
// link(2), fsync of its directory), and syncs the directories above it up
// to the dataset, so a new plans/ or attempts/<plan>/ cannot vanish with
// the record. It reports whether it created the file.
func (s *Store) createRecord(path string, data []byte) (bool, error) {
	dir := filepath.Dir(path)
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	created, err := durable.CreateExclusive(path, "", data)
	if err != nil || !created {
		return created, err
	}
	for d := filepath.Dir(dir); d != s.root && strings.HasPrefix(d, s.root); d = filepath.Dir(d) {
		if err := durable.SyncDir(d); err != nil {
			return true, err
		}
	}
	return true, nil
}
