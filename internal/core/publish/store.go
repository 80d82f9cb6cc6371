package publish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

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
// returns the plan that is pinned (p, or the existing one to adopt). The
// second result reports whether p was the one pinned.
func (s *Store) Pin(p *Plan) (*Plan, bool, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, false, err
	}
	path := filepath.Join(s.plansDir(), p.Key()+".json")
	created, err := linkNew(path, data)
	if err != nil {
		return nil, false, fmt.Errorf("pin plan %s: %w", p.ID, err)
	}
	if created {
		return p, true, nil
	}
	existing, err := s.readPlan(path)
	return existing, false, err
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
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
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

// RetirePlan moves p's record aside, after checking that the pinned record
// is still p (a compare on the record). The caller holds the table's claim.
func (s *Store) RetirePlan(p *Plan) error {
	path := filepath.Join(s.plansDir(), p.Key()+".json")
	cur, err := s.readPlan(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.ID != p.ID {
		return fmt.Errorf("retire plan %s: the pinned plan is now %s: %w", p.ID, cur.ID, errs.ErrConflict)
	}
	return retire(path, filepath.Join(s.plansDir(), "retired", p.ID+".json"))
}

func (s *Store) readPlan(path string) (*Plan, error) {
	var p Plan
	if err := readRecord(path, KindPlan, &p); err != nil {
		return nil, err
	}
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

// Record records a complete descriptor set. It is never called with a
// partial one.
func (s *Store) Record(p *Prepared) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(s.attemptsDir(), p.Plan, p.Attempt+".json")
	created, err := linkNew(path, data)
	if err != nil {
		return fmt.Errorf("record descriptor set %s: %w", p.Attempt, err)
	}
	if !created {
		return fmt.Errorf("descriptor set %s already recorded: %w", p.Attempt, errs.ErrConflict)
	}
	return nil
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
		if err := readRecord(filepath.Join(dir, n), KindPrepared, &p); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // retired meanwhile
			}
			return nil, err
		}
		out = append(out, &p)
	}
	return out, nil
}

// RetireAttempt moves a descriptor set aside so it is never used again.
func (s *Store) RetireAttempt(p *Prepared) error {
	dir := filepath.Join(s.attemptsDir(), p.Plan)
	return retire(filepath.Join(dir, p.Attempt+".json"), filepath.Join(dir, p.Attempt+".retired.json"))
}

func readRecord(path, kind string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var head struct {
		Kind          string `json:"kind"`
		SchemaVersion int    `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("%s: %v: %w", path, err, errs.ErrCorrupt)
	}
	if head.Kind != kind || head.SchemaVersion < 1 || head.SchemaVersion > recordSchema {
		return fmt.Errorf("%s: record kind %q schema version %d, this walctl reads %q version %d: %w",
			path, head.Kind, head.SchemaVersion, kind, recordSchema, errs.ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %v: %w", path, err, errs.ErrCorrupt)
	}
	return nil
}

// linkNew creates path with data unless it exists: temp file, fsync,
// link(2), fsync the directory. It reports whether it created the file.
func linkNew(path string, data []byte) (bool, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, syncDir(dir)
}

func retire(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := syncDir(filepath.Dir(from)); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
