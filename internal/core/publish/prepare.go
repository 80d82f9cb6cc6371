package publish

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
)

// workspaceBound is what one open Lance file writer may hold of its own: the
// encoder's scratch (offset rewrites and full-zip ends of one page: at most
// twice the page bytes) plus its write buffer. It is reserved against the
// budget when a writer is admitted; a writer that ever needs more reserves
// the difference as it grows (FileWriter.WorkspaceBytes).
const workspaceBound = 2*lancefile.DefaultMaxPageBytes + 256<<10

// fileJob is one planned file of an attempt.
type fileJob struct {
	index int
	name  string
	rng   Range
	// lin collects the digest and per-entry row counts of what the file
	// holds: as its entries are fetched (streamed), or beside the writes
	// (buffered).
	lin *FileLineage
}

// prepare writes a new attempt of plan: one Lance data file per planned file
// range, each created exclusively under an attempt-unique name and synced,
// then records the complete descriptor set. Files hold no fragment ids:
// those are assigned at commit from the parent version.
//
// Buffered (the default) writes up to Config.BufferedFiles files at once,
// each from its entries fetched and decoded whole first; streamed
// (Config.PipelinePreparation) writes up to Config.StreamFiles files at once
// as their entries are decoded. Both write the same ranges with the same
// record batches, whole.
//
// If any file fails or ctx ends, every admitted writer finishes first, then
// the error is returned and nothing is recorded (a partial set is never
// recorded or published); files already written stay unreferenced.
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
	hash, err := s.rowHash(ctx)
	if err != nil {
		return nil, err
	}
	prep := &Prepared{Kind: KindPrepared, SchemaVersion: recordSchema, Plan: plan.ID, Attempt: newID()[:16], PreparedBy: s.p.cfg.Owner.ID}
	jobs := make([]fileJob, len(plan.Files))
	for i, fr := range plan.Files {
		jobs[i] = fileJob{index: i, name: fmt.Sprintf("walctl-%s-%s-%03d", plan.Key()[:12], prep.Attempt, i), rng: fr, lin: &FileLineage{Hash: hash}}
	}
	var descs []lance.Descriptor
	if s.p.cfg.PipelinePreparation {
		descs, err = s.prepareStreamed(ctx, plan, schema, fv, jobs)
	} else {
		descs, err = s.prepareBuffered(ctx, plan, schema, fv, jobs)
	}
	if err != nil {
		return nil, err
	}
	if len(descs) != len(plan.Files) {
		return nil, fmt.Errorf("prepare %s: %d of %d files written", plan.ID, len(descs), len(plan.Files))
	}
	for i, fr := range plan.Files {
		prep.Files = append(prep.Files, PreparedFile{Range: fr, Descriptor: descs[i], Lineage: jobs[i].lin})
	}
	if err := s.recordDigests(ctx, plan, hash, jobs); err != nil {
		return nil, err
	}
	prep.PreparedAt = s.now().UTC()
	if prep, err = s.store.Record(prep); err != nil {
		return nil, err
	}
	s.log.Info("prepared plan", "plan", plan.ID, "attempt", prep.Attempt, "files", len(prep.Files), "streamed", s.p.cfg.PipelinePreparation)
	if err := failpoint.Inject(ctx, failpoint.AfterDescriptorRecord, 0); err != nil {
		return nil, err
	}
	return prep, nil
}

// prepareBuffered writes the plan's files, Config.BufferedFiles at once, each
// from its whole range fetched and decoded first: one file's entries are
// fetched while another's are written (a single writer alternates between
// waiting for the WAL and writing, and halved e2e's publication rate). A
// writer is admitted once its encoder workspace and its range's WAL bytes
// are reserved (at most the whole budget): the decoded entries point into
// the WAL bytes, so they fit.
func (s *Session) prepareBuffered(ctx context.Context, plan *Plan, schema *lance.Schema, fv lance.FileVersion, jobs []fileJob) ([]lance.Descriptor, error) {
	need := func(j fileJob) int64 {
		n := workspaceBound + max(0, j.rng.Bytes)
		if b := s.p.cfg.Budget; b != nil {
			n = min(n, b.Total())
		}
		return n
	}
	return s.prepareFiles(ctx, plan, jobs, s.p.cfg.BufferedFiles, need,
		func(ctx context.Context, j fileJob, held int64, written func(int64)) (lance.Descriptor, error) {
			return s.writeBuffered(ctx, schema, fv, j, held, written)
		})
}

func fileErr(plan *Plan, j fileJob, err error) error {
	return fmt.Errorf("prepare %s file %d (shard %d, positions %d–%d): %w", plan.ID, j.index, j.rng.Shard, j.rng.From, j.rng.To, err)
}

// writeBuffered fetches and decodes the range's entries, then writes them,
// each record batch whole, into one new data file (a writeFile). Its
// admission reserved held bytes: the encoder workspace and, beyond it, a
// pool the entries draw from; an entry the pool cannot cover reserves the
// rest itself. The whole file's entries and the workspace must fit the
// budget together; a file that cannot is budget.ErrTooLarge, never a wait
// for bytes this writer itself holds.
func (s *Session) writeBuffered(ctx context.Context, schema *lance.Schema, fv lance.FileVersion, j fileJob, held int64, written func(int64)) (lance.Descriptor, error) {
	b := s.p.cfg.Budget
	ws := int64(workspaceBound)
	pool := max(0, held-ws)
	var recs []arrow.RecordBatch
	var keep int64 // held until Close (finishFile)
	free := sync.OnceFunc(func() {
		for _, r := range recs {
			r.Release()
		}
		written(held - keep)
	})
	defer free()
	reserve := func(ctx context.Context, n int64, what string) error {
		if n <= pool {
			pool -= n
			return nil
		}
		extra := n - pool
		if err := tooLarge(b, extra, held, what); err != nil {
			return err
		}
		if err := b.Reserve(ctx, extra, what); err != nil {
			return err
		}
		held, pool = held+extra, 0
		return nil
	}
	fj := j
	fj.lin = nil // digested below, beside the writes
	err := s.fetch(ctx, fj, reserve, func(rec arrow.RecordBatch, _ uint64, _ int64) error {
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return lance.Descriptor{}, err
	}
	// The entries' digests (the file's lineage) are taken on another core
	// while the file is written: both only read the records, which stay
	// held until both are done (this wait runs before free).
	digested := make(chan struct{})
	go func() {
		defer close(digested)
		for _, r := range recs {
			j.lin.add(r)
		}
	}()
	defer func() { <-digested }()
	w, err := s.ds.CreateFile(schema, lance.FileOptions{Name: j.name, Version: fv})
	if err != nil {
		return lance.Descriptor{}, err
	}
	for _, r := range recs {
		err := w.Write(r)
		if err == nil {
			var d int64
			d, err = s.growWorkspace(ctx, w, ws)
			ws, held = ws+d, held+d
		}
		if err != nil {
			_ = w.Abort()
			return lance.Descriptor{}, err
		}
	}
	<-digested
	return s.finishFile(w, j, func(k int64) int64 { keep = min(k, held); free(); return keep })
}

// growWorkspace reserves the difference when a writer's workspace outgrew
// the held bytes, and returns what it reserved (the caller releases it).
func (s *Session) growWorkspace(ctx context.Context, w *lance.FileWriter, held int64) (int64, error) {
	need := int64(w.WorkspaceBytes())
	if need <= held {
		return 0, nil
	}
	if err := s.p.cfg.Budget.Reserve(ctx, need-held, "Lance encoder workspace"); err != nil {
		return 0, err
	}
	return need - held, nil
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

// tooLarge reports an entry that could never be admitted: its bytes plus
// those its own writer already holds exceed the whole budget.
func tooLarge(b *budget.Budget, n, held int64, what string) error {
	if b == nil || n+held <= b.Total() {
		return nil
	}
	return fmt.Errorf("%s needs %d bytes and its writer holds %d, the memory budget is %d (raise worker.memory_budget or lower publication.file_bytes): %w",
		what, n, held, b.Total(), budget.ErrTooLarge)
}
