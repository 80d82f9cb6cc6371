package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
)

// KindCompaction is the record kind of a compaction's lineage.
const KindCompaction = "walctl.compaction"

const compactionsDir = "_walctl/compactions"

// DefaultCompactBytes is the size a compaction merges small fragments up to.
const DefaultCompactBytes = 128 << 20

// Compaction records what one walctl compaction wrote: its file and, in
// order, the fragments whose rows it holds, so a row of the file maps back
// to the data file (and through its descriptor set to the WAL position) it
// came from after the sources are cleaned away.
type Compaction struct {
	Kind          string           `json:"kind"`
	SchemaVersion int              `json:"schema_version"`
	ID            string           `json:"id"`
	File          lance.Descriptor `json:"file"`
	Sources       []CompactSource  `json:"sources"`
	Version       uint64           `json:"parent_version"`
}

// CompactSource is one fragment a compaction merged: its data file and rows.
type CompactSource struct {
	Fragment uint64 `json:"fragment"`
	Path     string `json:"path"`
	Rows     uint64 `json:"rows"`
}

// CompactGroup is one merge: the fragments replaced, the file replacing
// them and the version committed.
type CompactGroup struct {
	Replaced []uint64 `json:"replaced"`
	File     string   `json:"file"`
	Rows     uint64   `json:"rows"`
	Bytes    uint64   `json:"bytes"`
	Version  uint64   `json:"version"`
}

// CompactResult describes `walctl table compact`.
type CompactResult struct {
	Table      string         `json:"table"`
	Epoch      uint64         `json:"epoch"`
	Groups     []CompactGroup `json:"groups"`
	Watermarks Watermarks     `json:"watermarks"`
}

// Compact merges runs of adjacent small fragments (no deletion file, at most
// half of targetBytes each) into files of up to targetBytes, one Rewrite
// commit per run, under the session's claim and fenced epoch (rules 4, 6,
// 7, 10): each commit is checked against its exact parent (epoch equal to
// this session's, fragments still there and whole) and rebuilt on a lost
// race. Watermarks, epoch and plan keys are carried unchanged; the commit
// records the committer. Cancellation stops before the next commit; a file
// written for a lost commit stays unreferenced until `table clean`.
func (s *Session) Compact(ctx context.Context, targetBytes int64) (*CompactResult, error) {
	res := &CompactResult{Table: s.table, Groups: []CompactGroup{}}
	if err := s.p.stopped.check(s.table); err != nil {
		return res, err
	}
	err := s.compact(ctx, targetBytes, res)
	return res, s.p.stopped.note(s.table, err)
}

func (s *Session) compact(ctx context.Context, targetBytes int64, res *CompactResult) error {
	if targetBytes <= 0 {
		targetBytes = DefaultCompactBytes
	}
	if err := s.ensureFenced(ctx); err != nil {
		return err
	}
	res.Epoch = s.epoch
	for lost := 0; lost < s.p.cfg.CommitAttempts; {
		m, err := s.ds.Latest()
		if err != nil {
			return err
		}
		st, err := ParseState(m.Config)
		if err != nil {
			return err
		}
		res.Watermarks = st.Watermarks
		run := smallRun(m, targetBytes)
		if len(run) < 2 {
			return nil
		}
		g, err := s.compactRun(ctx, m, run)
		if errors.Is(err, lance.ErrCommitConflict) {
			lost++
			continue
		}
		if err != nil {
			return err
		}
		res.Groups = append(res.Groups, *g)
	}
	return fmt.Errorf("compact %s: still contended after %d attempts: %w", s.table, s.p.cfg.CommitAttempts, errs.ErrConflict)
}

// ensureFenced fences the table once per ownership, as a round does.
func (s *Session) ensureFenced(ctx context.Context) error {
	if err := s.claim.Err(); err != nil {
		return err
	}
	if s.fenced {
		return nil
	}
	if s.epoch == 0 {
		if err := s.advanceEpoch(ctx); err != nil {
			return err
		}
	}
	return s.fence(ctx)
}

// smallRun returns the first run of adjacent small fragments of m whose
// sizes add up to at most target.
func smallRun(m *lance.Manifest, target int64) []lance.Fragment {
	var run []lance.Fragment
	var size int64
	for _, f := range m.Fragments {
		var fb int64
		for _, df := range f.Files {
			fb += int64(df.SizeBytes)
		}
		if f.HasDeletionFile || f.HasRowIDs || f.PhysicalRows == 0 || fb > target/2 || size+fb > target {
			if len(run) >= 2 {
				return run
			}
			run, size = nil, 0
			if f.HasDeletionFile || f.HasRowIDs || f.PhysicalRows == 0 || fb > target/2 {
				continue
			}
		}
		run, size = append(run, f), size+fb
	}
	return run
}

// compactRun writes run's rows into one new file, verifies it, records its
// lineage and commits the Rewrite against m.
func (s *Session) compactRun(ctx context.Context, m *lance.Manifest, run []lance.Fragment) (*CompactGroup, error) {
	desc, sources, err := s.writeCompacted(m, run)
	if err != nil {
		return nil, err
	}
	if err := s.ds.VerifyFile(desc); err != nil { // rule 7
		return nil, fmt.Errorf("compacted file %s: %w: %w", desc.Path, err, ErrFilesDamaged)
	}
	id := newID()
	rec := &Compaction{Kind: KindCompaction, SchemaVersion: recordSchema, ID: id, File: desc, Sources: sources, Version: m.Version}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := s.store.createOwnRecord(s.p.cfg.Clock, compactionsDir+"/"+id+".json", data); err != nil {
		return nil, err
	}
	if err := s.beforeCompactCommit(ctx); err != nil {
		return nil, err
	}
	ids := make([]uint64, len(run))
	for i, f := range run {
		ids[i] = f.ID
	}
	cr, err := s.ds.Commit(ctx, lance.CommitRequest{
		ParentVersion: m.Version, Kind: lance.Rewrite, Replace: ids, Files: []lance.Descriptor{desc},
		ConfigSet: s.committer().delta(map[string]string{}), TxnID: id, Now: s.p.cfg.Clock.Now,
		Check: func(parent *lance.Manifest) error {
			ps, err := ParseState(parent.Config)
			if err != nil {
				return err
			}
			if ps.Epoch != s.epoch {
				return fmt.Errorf("version %d carries epoch %d, this compactor has %d: %w", parent.Version, ps.Epoch, s.epoch, ErrFenced)
			}
			return nil
		},
	})
	if errors.Is(err, durable.ErrSyncFailed) {
		// The Rewrite may be linked, but a failed fsync covered it: it is
		// not looked up (a later read proves nothing) and the table stops.
		return nil, fmt.Errorf("compact fragments %v on version %d: %w", ids, m.Version, err)
	}
	if errors.Is(err, lance.ErrCommitUnknown) {
		v, found, ferr := s.ds.FindTransaction(id, m.Version)
		if ferr != nil || !found {
			return nil, errors.Join(err, ferr)
		}
		cr, err = &lance.CommitResult{Version: v}, nil
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("compacted", "fragments", ids, "file", desc.Path, "version", cr.Version)
	return &CompactGroup{Replaced: ids, File: desc.Path, Rows: desc.Rows, Bytes: desc.Size, Version: cr.Version}, nil
}

// beforeCompactCommit is the early abort of a commit: the claim and the
// storage stop, the caller's guard, and the WAL epoch (a newer publisher
// fenced this one out).
func (s *Session) beforeCompactCommit(ctx context.Context) error {
	// The claim, read with the table's storage stop (rule 24).
	if err := s.claim.Valid(ctx); err != nil {
		return err
	}
	if err := s.commitGuard(ctx); err != nil {
		return err
	}
	we, err := s.p.log.Epoch(ctx, s.table)
	if err != nil {
		return err
	}
	if we != s.epoch {
		return fmt.Errorf("WAL publisher epoch of %s is %d, this compactor has %d: %w", s.table, we, s.epoch, ErrFenced)
	}
	return nil
}

// writeCompacted writes the rows of run, in order, into one new data file.
func (s *Session) writeCompacted(m *lance.Manifest, run []lance.Fragment) (lance.Descriptor, []CompactSource, error) {
	schema, err := m.Schema()
	if err != nil {
		return lance.Descriptor{}, nil, err
	}
	fv, err := m.FileVersion()
	if err != nil {
		return lance.Descriptor{}, nil, err
	}
	w, err := s.ds.CreateFile(schema, lance.FileOptions{Name: "walctl-compact-" + newID()[:16], Version: fv})
	if err != nil {
		return lance.Descriptor{}, nil, err
	}
	var sources []CompactSource
	for _, f := range run {
		rec, err := s.ds.ReadFragment(m, f)
		if err == nil {
			err = w.Write(rec)
			rec.Release()
		}
		if err != nil {
			_ = w.Abort()
			return lance.Descriptor{}, nil, err
		}
		sources = append(sources, CompactSource{Fragment: f.ID, Path: f.Files[0].Path, Rows: f.PhysicalRows})
	}
	desc, err := w.Close()
	return desc, sources, err
}

// Compactions returns every compaction record of the table.
func (s *Store) Compactions(ctx context.Context) ([]*Compaction, error) {
	return listRecords[Compaction](ctx, s, compactionsDir, KindCompaction)
}
