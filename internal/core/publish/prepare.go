package publish

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/wal"
)

// prepare writes a new attempt of plan: one Lance data file per planned file
// range, each created exclusively under an attempt-unique name and synced,
// then records the complete descriptor set. Files hold no fragment ids:
// those are assigned at commit from the parent version. If any file fails,
// nothing is recorded (a partial set is never recorded or published); files
// already written stay unreferenced.
func (s *Session) prepare(ctx context.Context, plan *Plan) (*Prepared, error) {
	m, err := s.ds.Latest()
	if err != nil {
		return nil, err
	}
	schema, err := m.Schema()
	if err != nil {
		return nil, err
	}
	fv, err := m.FileVersion()
	if err != nil {
		return nil, err
	}
	prep := &Prepared{Kind: KindPrepared, SchemaVersion: recordSchema, Plan: plan.ID, Attempt: newID()[:16], PreparedBy: s.p.cfg.Owner.ID}
	for i, fr := range plan.Files {
		if err := s.claim.Err(); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("walctl-%s-%s-%03d", plan.Key()[:12], prep.Attempt, i)
		desc, err := s.writeFile(ctx, schema, fv, name, fr)
		if err != nil {
			return nil, fmt.Errorf("prepare %s file %d (shard %d, positions %d–%d): %w", plan.ID, i, fr.Shard, fr.From, fr.To, err)
		}
		prep.Files = append(prep.Files, PreparedFile{Range: fr, Descriptor: desc})
		if err := failpoint.Inject(ctx, failpoint.AfterFilesPrepared, i+1); err != nil {
			return nil, err
		}
	}
	prep.PreparedAt = s.now().UTC()
	if err := s.store.Record(prep); err != nil {
		return nil, err
	}
	s.log.Info("prepared plan", "plan", plan.ID, "attempt", prep.Attempt, "files", len(prep.Files))
	if err := failpoint.Inject(ctx, failpoint.AfterDescriptorRecord, 0); err != nil {
		return nil, err
	}
	return prep, nil
}

// writeFile fetches and decodes the range's entries (buffered: each entry
// holds its bytes against the memory budget until written), then writes
// them, each record batch whole, into one new data file.
func (s *Session) writeFile(ctx context.Context, schema *lance.Schema, fv lance.FileVersion, name string, fr Range) (desc lance.Descriptor, err error) {
	var recs []arrow.RecordBatch
	var reserved int64
	defer func() {
		for _, r := range recs {
			r.Release()
		}
		s.p.cfg.Budget.Release(reserved)
	}()
	next := fr.From
	err = s.p.log.Read(ctx, s.table, fr.Shard, fr.From, fr.To, func(e wal.Entry) error {
		if e.Position != next {
			return fmt.Errorf("WAL returned position %d, expected %d: %w", e.Position, next, errs.ErrCorrupt)
		}
		next++
		n := RecordBytes(e.Record)
		if err := s.p.cfg.Budget.Reserve(ctx, n, fmt.Sprintf("WAL entry %d of shard %d", e.Position, fr.Shard)); err != nil {
			return err
		}
		reserved += n
		e.Record.Retain()
		recs = append(recs, e.Record)
		return nil
	})
	if err != nil {
		return desc, err
	}
	if next != fr.To+1 {
		return desc, fmt.Errorf("WAL ended at position %d, the plan needs %d: %w", next-1, fr.To, errs.ErrCorrupt)
	}
	w, err := s.ds.CreateFile(schema, lance.FileOptions{Name: name, Version: fv})
	if err != nil {
		return desc, err
	}
	ws := int64(w.WorkspaceBytes())
	if err := s.p.cfg.Budget.Reserve(ctx, ws, "Lance encoder workspace"); err != nil {
		_ = w.Abort()
		return desc, err
	}
	reserved += ws
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			_ = w.Abort()
			return desc, err
		}
	}
	return w.Close()
}

// RecordBytes is the memory a record batch holds: the sum of its buffers.
func RecordBytes(r arrow.RecordBatch) int64 {
	var n int64
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	for _, c := range r.Columns() {
		walk(c.Data())
	}
	return n
}
