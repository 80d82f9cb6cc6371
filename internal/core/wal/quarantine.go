package wal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
)

// ErrNotDamaged marks a quarantine of a generation that verifies (every
// entry's checksum matches) without Force.
var ErrNotDamaged = fmt.Errorf("generation is not damaged: %w", errs.ErrConflict)

const (
	quarantineDirName  = "quarantine"
	quarantineRecord   = "AUDIT.json"
	quarantineKind     = "wal-quarantine"
	quarantineVersion  = 1
	quarantineAction   = "quarantine-generation"
	quarantineStampFmt = "20060102T150405.000000000Z"
)

// QuarantineRequest asks to move one generation of a shard aside.
type QuarantineRequest struct {
	Table      string
	Shard      int
	Generation uint64 // its ID: the position of its first entry
	// Force quarantines a sealed generation that verifies.
	Force  bool
	Reason string
	Actor  string // who: kept in the audit record; required
}

// QuarantineRecord is the audit record of a quarantine: AUDIT.json in the
// directory the generation's files were moved to, <wal dir>/quarantine/
// <table>/shard-NNNN/gen-<first>-<time>/. Recovery reads it back: the
// positions First..Last stay unreadable and are never issued again.
type QuarantineRecord struct {
	Kind          string        `json:"kind"`
	SchemaVersion int           `json:"schema_version"`
	Action        string        `json:"action"`
	Table         string        `json:"table"`
	Shard         int           `json:"shard"`
	Generation    uint64        `json:"generation"`
	First         uint64        `json:"first"`
	Last          uint64        `json:"last"`
	LastIsBound   bool          `json:"last_is_upper_bound,omitempty"`
	Files         []string      `json:"files"`
	Actor         string        `json:"actor"`
	Reason        string        `json:"reason"`
	At            time.Time     `json:"at"`
	Forced        bool          `json:"forced,omitempty"`
	Damage        *DamageReport `json:"damage,omitempty"`
}

// QuarantineResult reports a quarantine.
type QuarantineResult struct {
	QuarantineRecord
	// Dir holds the moved files and the audit record.
	Dir string `json:"dir"`
}

// decodeQuarantineRecord parses an audit record, refusing one of another
// kind or version or whose fields do not fit together.
func decodeQuarantineRecord(b []byte) (QuarantineRecord, error) {
	var r QuarantineRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, err
	}
	switch {
	case r.Kind != quarantineKind || r.SchemaVersion != quarantineVersion:
		return r, fmt.Errorf("record of kind %q version %d, want %q version %d", r.Kind, r.SchemaVersion, quarantineKind, quarantineVersion)
	case ValidateName(r.Table) != nil || r.Shard < 0 || r.Shard >= MaxShards:
		return r, fmt.Errorf("record names table %q shard %d", r.Table, r.Shard)
	case r.First == 0 || r.Generation != r.First || r.Last < r.First:
		return r, fmt.Errorf("record covers positions %d..%d of generation %d", r.First, r.Last, r.Generation)
	}
	return r, nil
}

func (e *Engine) quarantineDir(table string, shard int) string {
	return filepath.Join(e.dir, quarantineDirName, table, shardDirName(shard))
}

// readQuarantine returns the shard's quarantined ranges. A quarantine that
// has no audit record did not finish (the record is written last): its
// files go back to the shard directory and the operator runs it again.
func (e *Engine) readQuarantine(table string, shard int) ([]hole, error) {
	qd := e.quarantineDir(table, shard)
	des, err := os.ReadDir(qd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hole
	for _, de := range des {
		dir := filepath.Join(qd, de.Name())
		b, err := os.ReadFile(filepath.Join(dir, quarantineRecord))
		if errors.Is(err, fs.ErrNotExist) {
			if err := e.undoQuarantine(dir, table, shard); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		r, err := decodeQuarantineRecord(b)
		if err != nil || r.Table != table || r.Shard != shard {
			return nil, corruptAt(filepath.Join(dir, quarantineRecord), 0, 0, "unreadable quarantine record (%v)", err)
		}
		rep := DamageReport{Table: table, Shard: shard, Generation: r.Generation, First: r.First, Last: r.Last,
			File: filepath.Join(dir, genName(r.Generation)+".arrows"), Detail: "quarantined by " + r.Actor + ": " + r.Reason, Quarantined: dir}
		if r.Damage != nil {
			rep.Offset, rep.Position, rep.Detail = r.Damage.Offset, r.Damage.Position, r.Damage.Detail
		}
		out = append(out, hole{rep: rep})
	}
	return out, nil
}

// undoQuarantine moves the files of an unfinished quarantine back.
func (e *Engine) undoQuarantine(dir, table string, shard int) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	shardDir := filepath.Join(e.dir, "tables", table, shardDirName(shard))
	for _, de := range des {
		if _, ok := parseGenName(de.Name()); ok {
			e.opts.Logger.Warn("wal: moving back the files of a quarantine that did not finish", "file", de.Name(), "from", dir)
			if err := durable.Rename(filepath.Join(dir, de.Name()), filepath.Join(shardDir, de.Name())); err != nil {
				return err
			}
		} else if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
			return err
		}
	}
	return durable.Remove(dir)
}

// Quarantine moves one generation of a shard aside, under <wal dir>/
// quarantine/, with an audit record (DESIGN.md §3 rule 18): never a repair.
// The generation must be damaged — found so at open, or failing its
// checksums now — unless req.Force, which also takes a sealed generation
// that verifies; the open generation is refused. Afterwards its positions
// (First..Last of the result; an upper bound when the damage reached the
// shard's end) stay unreadable: reads and trims reaching them fail with
// ErrCorruptEntry naming the quarantine directory, they are never issued
// again, and the shard takes appends after them. What becomes of them is
// an operator's decision: restore the files from a copy (move them back and
// delete the quarantine directory; the next open verifies them), or leave
// the shard's publication stopped at the gap. Not cancellable once the
// files start moving; a crash before the record is written is undone at the
// next open.
func (e *Engine) Quarantine(ctx context.Context, req QuarantineRequest) (QuarantineResult, error) {
	if err := e.enter(ctx); err != nil {
		return QuarantineResult{}, err
	}
	defer e.life.RUnlock()
	_, s, err := e.shard(req.Table, req.Shard)
	if err != nil {
		return QuarantineResult{}, err
	}
	if req.Actor == "" {
		return QuarantineResult{}, fmt.Errorf("quarantine of table %q shard %d: no actor named: %w", req.Table, req.Shard, errs.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.err == nil && (s.syncing || len(s.sealing) > 0 || len(s.pending) > 0) {
		s.waitOrSync()
	}
	rec, target, err := s.quarantineTarget(req)
	if err != nil {
		return QuarantineResult{}, err
	}
	now := e.opts.Clock.Now().UTC()
	rec.At, rec.Actor, rec.Reason = now, req.Actor, req.Reason
	dir := filepath.Join(e.quarantineDir(req.Table, req.Shard), genName(req.Generation)+"-"+now.Format(quarantineStampFmt))
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return QuarantineResult{}, fmt.Errorf("quarantine: %v: %w", err, ErrIO)
	}
	if target != nil {
		target.closeFiles()
	}
	base := filepath.Join(s.dir, genName(req.Generation))
	for _, p := range []string{base + ".arrows", base + ".idx"} {
		err := durable.Rename(p, filepath.Join(dir, filepath.Base(p)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return QuarantineResult{}, fmt.Errorf("quarantine: move %s: %v: %w", p, err, ErrIO)
		}
		rec.Files = append(rec.Files, filepath.Base(p))
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return QuarantineResult{}, err
	}
	if _, err := durable.CreateExclusive(filepath.Join(dir, quarantineRecord), "", append(b, '\n')); err != nil {
		return QuarantineResult{}, fmt.Errorf("quarantine: write the audit record in %s (the files are moved; the next open moves them back): %v: %w", dir, err, ErrIO)
	}
	s.applyQuarantine(rec, target, dir)
	return QuarantineResult{QuarantineRecord: rec, Dir: dir}, nil
}

// quarantineTarget finds what req names, under s.mu: a damage hole of that
// generation, or (verified now) one of the shard's sealed generations.
func (s *shard) quarantineTarget(req QuarantineRequest) (QuarantineRecord, *gen, error) {
	rec := QuarantineRecord{Kind: quarantineKind, SchemaVersion: quarantineVersion, Action: quarantineAction,
		Table: req.Table, Shard: req.Shard, Generation: req.Generation, Forced: req.Force}
	where := fmt.Sprintf("table %q shard %d generation %d", req.Table, req.Shard, req.Generation)
	for _, h := range s.holes {
		if h.rep.Generation != req.Generation {
			continue
		}
		if h.rep.Quarantined != "" {
			return rec, nil, fmt.Errorf("%s is already quarantined in %s: %w", where, h.rep.Quarantined, errs.ErrConflict)
		}
		rep := h.rep
		rec.First, rec.Last, rec.Damage, rec.Forced = rep.First, rep.Last, &rep, false
		if rec.Last == 0 {
			rec.Last, rec.LastIsBound = s.positionBound(req.Generation), true
		}
		return rec, nil, nil
	}
	for _, g := range s.gens {
		if g.first != req.Generation {
			continue
		}
		if !g.sealed {
			return rec, nil, fmt.Errorf("%s is the open generation; seal it first (walctl wal seal): %w", where, ErrNotDamaged)
		}
		rec.First, rec.Last = g.first, g.last()
		_, _, err := loadGen(s.dir, g.first, s.t.schemaBytes, false, true, 0, s.e.opts.Clock.Now())
		var ce *corruptError
		if errors.As(err, &ce) {
			rep := s.newHole(ce, g.first, g.first, g.last()).rep
			rec.Damage, rec.Forced = &rep, false
			return rec, g, nil
		}
		if err != nil {
			return rec, nil, fmt.Errorf("%s: verify: %v: %w", where, err, ErrIO)
		}
		if !req.Force {
			return rec, nil, fmt.Errorf("%s verifies (every entry's checksum matches); quarantining it makes positions %d..%d unreadable — pass --force to do it anyway: %w",
				where, g.first, g.last(), ErrNotDamaged)
		}
		return rec, g, nil
	}
	return rec, nil, fmt.Errorf("%s: no such generation (walctl wal stats and walctl doctor list the shard's generations and damage): %w", where, ErrBeyondEnd)
}

// positionBound is the highest position a damaged last generation can
// hold: one per index record after the header, or what a synced record in
// it vouches for, whichever is higher.
func (s *shard) positionBound(first uint64) uint64 {
	b, _ := os.ReadFile(filepath.Join(s.dir, genName(first)+".idx"))
	b = liveIndex(b)
	synced, _ := idxEvidence(b)
	return max(first+uint64(max(len(b)/recSize-1, 1))-1, synced)
}

// applyQuarantine updates the shard after a quarantine, under s.mu.
func (s *shard) applyQuarantine(rec QuarantineRecord, target *gen, dir string) {
	if target != nil {
		for i, g := range s.gens {
			if g == target {
				s.gens = append(s.gens[:i:i], s.gens[i+1:]...)
				break
			}
		}
	}
	rep := DamageReport{Table: rec.Table, Shard: rec.Shard, Generation: rec.Generation, First: rec.First, Last: rec.Last,
		File: filepath.Join(dir, genName(rec.Generation)+".arrows"), Detail: "quarantined by " + rec.Actor + ": " + rec.Reason, Quarantined: dir}
	if rec.Damage != nil {
		rep.Offset, rep.Position, rep.Detail = rec.Damage.Offset, rec.Damage.Position, rec.Damage.Detail
	}
	kept := s.holes[:0]
	for _, h := range s.holes {
		if h.rep.Generation != rec.Generation {
			kept = append(kept, h)
		}
	}
	s.holes = append(kept, hole{rep: rep})
	sort.Slice(s.holes, func(i, j int) bool { return s.holes[i].rep.First < s.holes[j].rep.First })
	if s.frozen != nil && s.holeIn(rec.Last+1, rec.Last+1) == nil {
		// The damage reached the shard's end; its end is now known.
		s.frozen = nil
		s.next = rec.Last + 1
		s.synced, s.written = rec.Last, rec.Last
	}
}
